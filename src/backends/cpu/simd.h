#pragma once
// The fixed-order horizontal sum the CPU kernels end their reductions with.
#include <immintrin.h>

namespace fs::cpu {

// The 8 lanes of v summed in a fixed order.
inline float hsum8(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

}  // namespace fs::cpu

#include "backends/cpu/exp8.h"

#include <cmath>
#include <cstdint>

namespace fs::cpu {

namespace {

// glibc's __exp2f_data: tab[i] = bits of 2^(i/32) less i << 47, then 32/ln 2, the cubic's coefficients scaled by
// 1/32^3, 1/32^2, 1/32, and the shift that rounds to an integer.
alignas(32) constexpr uint64_t kTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
constexpr uint64_t kInvLn2N = 0x40471547652b82fe;
constexpr uint64_t kC0 = 0x3ebc6af84b912394, kC1 = 0x3f2ebfce50fac4f3, kC2 = 0x3f962e42ff0c52d6;
constexpr uint64_t kShift = 0x4338000000000000;
// The top 12 bits (sign masked off) above which glibc leaves the table: |x| ≥ 88, inf, nan.
constexpr uint32_t kLastTop = 0x42a;

__m256d constant(uint64_t bits) { return _mm256_castsi256_pd(_mm256_set1_epi64x(int64_t(bits))); }

// 4 lanes of glibc's fast path, in its operation order.
__m128 exp4(__m128 x) {
  const __m256d xd = _mm256_cvtps_pd(x), inv = constant(kInvLn2N), shift = constant(kShift);
  const __m256d kd_shifted = _mm256_fmadd_pd(inv, xd, shift);
  const __m256i ki = _mm256_castpd_si256(kd_shifted);
  const __m256d kd = _mm256_sub_pd(kd_shifted, shift);
  const __m256d r = _mm256_fmsub_pd(inv, xd, kd);
  const __m256i index = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
  const __m256i t = _mm256_add_epi64(_mm256_i64gather_epi64(reinterpret_cast<const long long*>(kTable), index, 8),
                                     _mm256_slli_epi64(ki, 47));
  const __m256d s = _mm256_castsi256_pd(t);
  const __m256d z = _mm256_fmadd_pd(r, constant(kC0), constant(kC1));
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_fmadd_pd(r, constant(kC2), _mm256_set1_pd(1.0));
  y = _mm256_fmadd_pd(z, r2, y);
  return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}

}  // namespace

__m256 exp8(__m256 x) {
  __m256 y = _mm256_set_m128(exp4(_mm256_extractf128_ps(x, 1)), exp4(_mm256_castps256_ps128(x)));
  const __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 20), _mm256_set1_epi32(0x7ff));
  const int special = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(top, _mm256_set1_epi32(kLastTop))));
  if (special) {
    alignas(32) float in[8], out[8];
    _mm256_store_ps(in, x);
    _mm256_store_ps(out, y);
    for (int i = 0; i < 8; ++i)
      if (special & (1 << i)) out[i] = std::exp(in[i]);
    y = _mm256_load_ps(out);
  }
  return y;
}

}  // namespace fs::cpu

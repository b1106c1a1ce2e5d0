#pragma once
// expf for 8 floats at once with the bits of glibc's expf on x86-64 with FMA (__expf_fma): the same 32-entry table
// of 2^(i/32), the same cubic and the same fused operations in double, lane by lane.
#include <immintrin.h>

namespace fs::cpu {

// exp of each lane; lanes with |x| ≥ 88 (or inf, nan) go through std::exp itself.
__m256 exp8(__m256 x);

}  // namespace fs::cpu

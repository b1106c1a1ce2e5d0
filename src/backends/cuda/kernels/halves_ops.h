#pragma once
// Weights already on the device, looked at and rewritten in place: their largest magnitude, and bf16 turned to f16.
#include <cstddef>
#include <cstdint>

namespace fs::cuda::kernels {

// *out = max(*out, |p[i]|) over n bf16 (or f32) values; *out starts non-negative. A NaN leaves *out above every
// finite magnitude.
void fold_max_abs_bf16(const uint16_t* p, size_t n, float* out, void* stream);
void fold_max_abs_f32(const float* p, size_t n, float* out, void* stream);

// Rewrites n bf16 values as f16 in place, each rounded to nearest even: exact for magnitudes from 2^-14 to 65504,
// to f16's subnormal steps of 2^-24 below that, and ±inf above.
void bf16_to_f16(uint16_t* p, size_t n, void* stream);

}  // namespace fs::cuda::kernels

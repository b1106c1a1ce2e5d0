#pragma once
// Whether f16 can carry a GEMM whose input rows come straight out of an RMSNorm.
#include <cmath>

namespace fs::cuda {

// The largest finite f16.
inline constexpr float kF16Max = 65504.0f;

// True when the GEMM's weights (largest magnitude weight_max) and every input it can be given fit f16's range. An
// RMSNorm output element is |x_i| / rms(x) · |w_i| ≤ sqrt(dim) · norm_max, since x_i² ≤ Σ x² = dim · rms(x)² (the
// eps under the root only shrinks it). A NaN in either maximum gives false.
inline bool f16_holds_normed_inputs(int dim, float norm_max, float weight_max) {
  return std::sqrt(double(dim)) * double(norm_max) <= kF16Max && weight_max <= kF16Max;
}

}  // namespace fs::cuda

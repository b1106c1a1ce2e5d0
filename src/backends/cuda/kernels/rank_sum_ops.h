#pragma once
// The rank-ordered sum of tensor-parallel partials on the device (host/rank_sum_order.h is its reference).
#include <cstddef>

namespace fs::cuda::kernels {

// out[i] = ((gathered[i] + gathered[n + i]) + gathered[2n + i]) + ... over `ranks` rows of gathered [ranks, n];
// out may alias row 0 of gathered or any buffer of n floats. Throws fs::Error if the launch fails.
void rank_sum(const float* gathered, int ranks, std::size_t n, float* out, void* stream);

}  // namespace fs::cuda::kernels

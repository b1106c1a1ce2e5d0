#pragma once
// The fixed order in which tensor-parallel partials are summed: out[i] = ((p0[i] + p1[i]) + p2[i]) + ..., rank by rank,
// so every rank gets the same bits whatever NCCL's algorithm. The CUDA kernel (kernels/rank_sum_ops.h) follows it; this
// host version is its reference.
#include <cstddef>

namespace fs::cuda {

// out[i] = sum over r in rank order of gathered[r · n + i], for i < n; gathered is [ranks, n].
void rank_sum_host(const float* gathered, int ranks, std::size_t n, float* out);

}  // namespace fs::cuda

// Sum of the ranks' partials in rank order: one thread per element, plain adds (no reassociation, no contraction).
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/rank_sum_ops.h"

namespace fs::cuda::kernels {

namespace {

constexpr int kSumThreads = 256;

__global__ void __launch_bounds__(kSumThreads) rank_sum_kernel(const float* gathered, int ranks, size_t n, float* out) {
  wait_for_previous_grid();
  const size_t stride = size_t(gridDim.x) * kSumThreads;
  for (size_t i = size_t(blockIdx.x) * kSumThreads + threadIdx.x; i < n; i += stride) {
    float sum = gathered[i];
    for (int r = 1; r < ranks; ++r) sum = __fadd_rn(sum, gathered[size_t(r) * n + i]);
    out[i] = sum;
  }
}

}  // namespace

void rank_sum(const float* gathered, int ranks, std::size_t n, float* out, void* stream) {
  if (n == 0) return;
  const unsigned blocks = grid_stride_blocks(n, kSumThreads, 4096);
  launch_overlapping_kernel("rank_sum", rank_sum_kernel, dim3(blocks), dim3(kSumThreads), 0, stream, gathered, ranks, n,
                out);
}

}  // namespace fs::cuda::kernels

// Kernels of a tensor-parallel rank.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/tensor_parallel_ops.h"

namespace fs::cuda::kernels {

namespace {

constexpr int kThreads = 256;

__global__ void embedding_slice_kernel(const uint16_t* table, const int32_t* ids, int dim, int vocab_begin,
                                       int vocab_rows, float* out) {
  wait_for_previous_grid();
  const int r = blockIdx.x, id = ids[r] - vocab_begin;
  const bool mine = id >= 0 && id < vocab_rows;
  for (int d = threadIdx.x; d < dim; d += blockDim.x)
    out[size_t(r) * dim + d] = mine ? bf16_bits_to_f32(table[size_t(id) * dim + d]) : 0.0f;
}

__global__ void add_kernel(float* x, const float* y, size_t n) {
  wait_for_previous_grid();
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] += y[i];
}

__global__ void interleave_kernel(const float* gathered, int ranks, int rows, int slice, float* logits) {
  wait_for_previous_grid();
  const int row = blockIdx.x, rank = blockIdx.y;
  const float* src = gathered + (size_t(rank) * rows + row) * slice;
  float* dst = logits + size_t(row) * ranks * slice + size_t(rank) * slice;
  for (int i = threadIdx.x; i < slice; i += blockDim.x) dst[i] = src[i];
}

unsigned blocks_for(size_t n) { return grid_stride_blocks(n, kThreads, 4096); }

}  // namespace

void embedding_slice(const uint16_t* table, const int32_t* ids, int rows, int dim, int vocab_begin, int vocab_rows,
                     float* out, void* stream) {
  if (rows == 0) return;
  launch_overlapping_kernel("embedding_slice", embedding_slice_kernel, dim3(rows), dim3(kThreads), 0, stream, table, ids, dim,
                vocab_begin, vocab_rows, out);
}

void add_in_place(float* x, const float* y, size_t n, void* stream) {
  if (n == 0) return;
  launch_overlapping_kernel("add_in_place", add_kernel, dim3(blocks_for(n)), dim3(kThreads), 0, stream, x, y, n);
}

void interleave_slices(const float* gathered, int ranks, int rows, int slice, float* logits, void* stream) {
  if (rows == 0) return;
  launch_overlapping_kernel("interleave_slices", interleave_kernel, dim3(rows, ranks), dim3(kThreads), 0, stream, gathered,
                ranks, rows, slice, logits);
}

}  // namespace fs::cuda::kernels

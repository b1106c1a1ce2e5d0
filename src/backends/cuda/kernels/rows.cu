// Row-wise kernels: embedding lookup, RMSNorm, SwiGLU.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/ops.h"

namespace fs::cuda::kernels {

namespace {

constexpr int kRowThreads = 256;

__global__ void embedding_kernel(const uint16_t* table, const int32_t* ids, int dim, float* out) {
  wait_for_previous_grid();
  const int r = blockIdx.x;
  const uint16_t* src = table + size_t(ids[r]) * dim;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) out[size_t(r) * dim + d] = bf16_bits_to_f32(src[d]);
}

// Sum of squares with a fixed per-thread stride and a fixed shared-memory tree.
__device__ float block_sum_squares(const float* x, int dim) {
  __shared__ float part[kRowThreads];
  float s = 0.0f;
  for (int d = threadIdx.x; d < dim; d += kRowThreads) s = fmaf(x[d], x[d], s);
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kRowThreads / 2; w > 0; w >>= 1) {
    if (int(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  return part[0];
}

template <typename Out>
__device__ void store(Out* y, size_t i, float v);
template <>
__device__ void store<float>(float* y, size_t i, float v) { y[i] = v; }
template <>
__device__ void store<uint16_t>(uint16_t* y, size_t i, float v) { y[i] = f32_to_bf16_bits(v); }

template <typename Out>
__global__ void __launch_bounds__(kRowThreads) rmsnorm_kernel(const float* x, const int32_t* gather,
                                                                const float* weight, int dim, float eps, Out* y) {
  wait_for_previous_grid();
  const int r = blockIdx.x;
  const float* xr = x + size_t(gather ? gather[r] : r) * dim;
  const float inv = 1.0f / sqrtf(block_sum_squares(xr, dim) / float(dim) + eps);
  for (int d = threadIdx.x; d < dim; d += kRowThreads) store(y, size_t(r) * dim + d, weight[d] * (xr[d] * inv));
}

__global__ void swiglu_kernel(const float* gu, int ffn, uint16_t* out) {
  wait_for_previous_grid();
  const int r = blockIdx.y;
  const int f = blockIdx.x * blockDim.x + threadIdx.x;
  if (f >= ffn) return;
  const float g = gu[size_t(r) * 2 * ffn + f], u = gu[size_t(r) * 2 * ffn + ffn + f];
  out[size_t(r) * ffn + f] = swiglu_bits(g, u);
}

}  // namespace

void embedding(const uint16_t* table, const int32_t* ids, int rows, int dim, float* out, void* stream) {
  if (rows == 0) return;
  launch_overlapping_kernel("embedding", embedding_kernel, dim3(rows), dim3(kRowThreads), 0, stream, table, ids, dim, out);
}

void rmsnorm_bf16(const float* x, const int32_t* gather, const float* weight, int rows, int dim, float eps,
                  uint16_t* y, void* stream) {
  if (rows == 0) return;
  launch_overlapping_kernel("rmsnorm", rmsnorm_kernel<uint16_t>, dim3(rows), dim3(kRowThreads), 0, stream, x, gather, weight, dim,
                eps, y);
}

void rmsnorm_f32(const float* x, const int32_t* gather, const float* weight, int rows, int dim, float eps, float* y,
                 void* stream) {
  if (rows == 0) return;
  launch_overlapping_kernel("rmsnorm", rmsnorm_kernel<float>, dim3(rows), dim3(kRowThreads), 0, stream, x, gather, weight, dim, eps,
                y);
}

void swiglu(const float* gu, int rows, int ffn, uint16_t* out, void* stream) {
  if (rows == 0) return;
  dim3 grid((ffn + kRowThreads - 1) / kRowThreads, rows);
  launch_overlapping_kernel("swiglu", swiglu_kernel, grid, dim3(kRowThreads), 0, stream, gu, ffn, out);
}

}  // namespace fs::cuda::kernels

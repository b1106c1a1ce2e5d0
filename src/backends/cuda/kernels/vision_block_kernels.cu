// Kernels of the Qwen3.5-style tower parts: LayerNorm with bias to bf16, GELU (tanh or exact) with a zero-padded
// output stride, and the learned position grid's four bilinear taps added to each patch row.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/vision_ops.h"

namespace fs::cuda::kernels {

namespace {

constexpr int kThreads = 256;

// Sum over the row with a fixed per-thread stride and a fixed shared-memory tree.
__device__ float row_sum(float s) {
  __shared__ float part[kThreads];
  __syncthreads();
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (int(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  return part[0];
}

__global__ void __launch_bounds__(kThreads) layer_norm_kernel(const float* x, const float* weight, const float* bias,
                                                              int dim, float eps, uint16_t* y) {
  const float* xr = x + size_t(blockIdx.x) * dim;
  float s = 0.0f;
  for (int d = threadIdx.x; d < dim; d += kThreads) s += xr[d];
  const float mean = row_sum(s) / float(dim);
  float q = 0.0f;
  for (int d = threadIdx.x; d < dim; d += kThreads) q = fmaf(xr[d] - mean, xr[d] - mean, q);
  const float inv = 1.0f / sqrtf(row_sum(q) / float(dim) + eps);
  for (int d = threadIdx.x; d < dim; d += kThreads)
    y[size_t(blockIdx.x) * dim + d] = f32_to_bf16_bits((xr[d] - mean) * inv * weight[d] + bias[d]);
}

__global__ void gelu_padded_kernel(const float* x, int cols, int out_stride, bool tanh_form, uint16_t* out) {
  const int r = blockIdx.y;
  const int f = blockIdx.x * blockDim.x + threadIdx.x;
  if (f >= out_stride) return;
  float v = 0.0f;
  if (f < cols) {
    const float m = x[size_t(r) * cols + f];
    v = tanh_form ? 0.5f * m * (1.0f + tanhf(0.7978845608028654f * (m + 0.044715f * m * m * m)))
                  : 0.5f * m * (1.0f + erff(m * 0.70710678118654752f));
  }
  out[size_t(r) * out_stride + f] = f32_to_bf16_bits(v);
}

__global__ void add_position_taps_kernel(float* x, const float* grid, const int32_t* index, const float* weight,
                                         int dim) {
  const int r = blockIdx.x;
  const int32_t* ix = index + size_t(r) * 4;
  const float* wt = weight + size_t(r) * 4;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    float pos = 0.0f;
    for (int k = 0; k < 4; ++k) pos += grid[size_t(ix[k]) * dim + d] * wt[k];
    x[size_t(r) * dim + d] += pos;
  }
}

}  // namespace

void layer_norm_bf16(const float* x, const float* weight, const float* bias, int rows, int dim, float eps, uint16_t* y,
                     void* stream) {
  if (rows == 0) return;
  launch_kernel("layer_norm_bf16", layer_norm_kernel, dim3(rows), dim3(kThreads), 0, stream, x, weight, bias, dim, eps,
                y);
}

void gelu_padded(const float* x, int rows, int cols, int out_stride, bool tanh_form, uint16_t* out, void* stream) {
  if (rows == 0) return;
  if (out_stride < cols) throw Error("gelu output stride is smaller than the row width");
  dim3 grid(static_cast<unsigned>((out_stride + kThreads - 1) / kThreads), static_cast<unsigned>(rows));
  launch_kernel("gelu_padded", gelu_padded_kernel, grid, dim3(kThreads), 0, stream, x, cols, out_stride, tanh_form,
                out);
}

void add_position_taps(float* x, const float* grid, const int32_t* index, const float* weight, int rows, int dim,
                       void* stream) {
  if (rows == 0) return;
  launch_kernel("add_position_taps", add_position_taps_kernel, dim3(rows), dim3(kThreads), 0, stream, x, grid, index,
                weight, dim);
}

}  // namespace fs::cuda::kernels

// Row-wise kernels: embedding lookup, RMSNorm, SwiGLU.
#include <cuda_fp16.h>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/ops.h"

namespace fs::cuda::kernels {

namespace {

constexpr int kRowThreads = 256;

__global__ void embedding_kernel(const uint16_t* table, const int32_t* ids, int dim, float* out) {
  let_next_grid_start();
  wait_for_previous_grid();
  const int r = blockIdx.x;
  const uint16_t* src = table + size_t(ids[r]) * dim;
#pragma unroll 8
  for (int d = threadIdx.x; d < dim; d += blockDim.x) out[size_t(r) * dim + d] = bf16_bits_to_f32(src[d]);
}

constexpr int kBatch = 8;  // loads a thread issues before it uses the first
constexpr int kHeld = 24;  // values a thread keeps in registers: rows up to kHeld · kRowThreads are read once

// A fixed tree over the threads' sums: part[t] += part[t + w] for w = 128, 64, …, 1. Warp 0 runs the last steps:
// w = 128, 64, 32 from shared memory in the tree's order, then w = 16 … 1 by shuffles (lane t adds lane t + w, as
// the tree adds part[t + w]).
__device__ float block_tree_sum(float s) {
  static_assert(kRowThreads == 256, "the tree's first three steps are written out for 256 threads");
  __shared__ float part[kRowThreads];
  __shared__ float total;
  part[threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    const int t = threadIdx.x;
    const float q0 = part[t] + part[t + 128], q1 = part[t + 64] + part[t + 192];
    const float q2 = part[t + 32] + part[t + 160], q3 = part[t + 96] + part[t + 224];
    float v = (q0 + q1) + (q2 + q3);
    for (int w = 16; w > 0; w >>= 1) v += __shfl_down_sync(0xffffffffu, v, w);
    if (t == 0) total = v;
  }
  __syncthreads();
  return total;
}

// Sum of squares: each thread adds its elements d = t, t + 256, … in order, then the tree.
__device__ float block_sum_squares(const float* x, int dim) {
  float s = 0.0f;
  int d = threadIdx.x;
  for (; d + (kBatch - 1) * kRowThreads < dim; d += kBatch * kRowThreads) {
    float v[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) v[i] = x[d + i * kRowThreads];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) s = fmaf(v[i], v[i], s);
  }
  for (; d < dim; d += kRowThreads) s = fmaf(x[d], x[d], s);
  return block_tree_sum(s);
}

template <typename Out>
__device__ void store(Out* y, size_t i, float v);
template <>
__device__ void store<float>(float* y, size_t i, float v) { y[i] = v; }
template <>
__device__ void store<uint16_t>(uint16_t* y, size_t i, float v) { y[i] = f32_to_bf16_bits(v); }
template <>
__device__ void store<__half>(__half* y, size_t i, float v) { y[i] = __float2half_rn(v); }

template <typename Out>
__global__ void __launch_bounds__(kRowThreads) rmsnorm_kernel(const float* x, const int32_t* gather,
                                                                const float* weight, int dim, float eps, Out* y) {
  let_next_grid_start();
  // Rows that fit kHeld values a thread stay in registers with their weights, each read once (the weights before the
  // wait: no kernel writes them); the sums and products are those of the longer rows' loop below.
  const bool held = dim <= kHeld * kRowThreads;
  float w[kHeld];
#pragma unroll
  for (int i = 0; i < kHeld; ++i) {
    const int d = threadIdx.x + i * kRowThreads;
    w[i] = held && d < dim ? weight[d] : 0.0f;
  }
  wait_for_previous_grid();
  const int r = blockIdx.x;
  const float* xr = x + size_t(gather ? gather[r] : r) * dim;
  Out* yr = y + size_t(r) * dim;
  if (held) {
    float v[kHeld];
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const int d = threadIdx.x + i * kRowThreads;
      v[i] = d < dim ? xr[d] : 0.0f;
    }
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kHeld; ++i)
      if (threadIdx.x + i * kRowThreads < dim) s = fmaf(v[i], v[i], s);
    const float inv = 1.0f / sqrtf(block_tree_sum(s) / float(dim) + eps);
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const int d = threadIdx.x + i * kRowThreads;
      if (d < dim) store(yr, size_t(d), w[i] * (v[i] * inv));
    }
    return;
  }
  const float inv = 1.0f / sqrtf(block_sum_squares(xr, dim) / float(dim) + eps);
  int d = threadIdx.x;
  for (; d + (kBatch - 1) * kRowThreads < dim; d += kBatch * kRowThreads) {
    float v[kBatch], w[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) v[i] = xr[d + i * kRowThreads], w[i] = weight[d + i * kRowThreads];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) store(yr, size_t(d + i * kRowThreads), w[i] * (v[i] * inv));
  }
  for (; d < dim; d += kRowThreads) store(yr, size_t(d), weight[d] * (xr[d] * inv));
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

void rmsnorm_halves(HalfType halves, const float* x, const int32_t* gather, const float* weight, int rows, int dim,
                    float eps, uint16_t* y, void* stream) {
  if (halves == HalfType::bf16) return rmsnorm_bf16(x, gather, weight, rows, dim, eps, y, stream);
  if (rows == 0) return;
  launch_overlapping_kernel("rmsnorm", rmsnorm_kernel<__half>, dim3(rows), dim3(kRowThreads), 0, stream, x, gather,
                            weight, dim, eps, reinterpret_cast<__half*>(y));
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

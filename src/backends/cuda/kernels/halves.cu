// The largest magnitude of device values, and bf16 → f16 in place.
#include <cuda_fp16.h>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/halves_ops.h"
#include "backends/cuda/kernels/launch.cuh"

namespace fs::cuda::kernels {

namespace {

constexpr int kThreads = 256;
constexpr unsigned kBlocks = 1024;

__device__ __forceinline__ float magnitude(uint16_t bf16) { return fabsf(bf16_bits_to_f32(bf16)); }
__device__ __forceinline__ float magnitude(float f) { return fabsf(f); }

// Non-negative floats (NaN's bits above +inf's) order as their bits do, so the fold is an unsigned atomicMax.
template <typename T>
__global__ void max_abs_kernel(const T* p, size_t n, float* out) {
  uint32_t best = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    best = max(best, __float_as_uint(magnitude(p[i])));
  for (int offset = 16; offset > 0; offset >>= 1) best = max(best, __shfl_xor_sync(0xffffffffu, best, offset));
  if (threadIdx.x % 32 == 0) atomicMax(reinterpret_cast<unsigned*>(out), best);
}

__global__ void bf16_to_f16_kernel(uint16_t* p, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = __half_as_ushort(__float2half_rn(bf16_bits_to_f32(p[i])));
}

unsigned blocks_for(size_t n) { return grid_stride_blocks(n, kThreads, kBlocks); }

}  // namespace

void fold_max_abs_bf16(const uint16_t* p, size_t n, float* out, void* stream) {
  if (n == 0) return;
  launch_kernel("max_abs_bf16", max_abs_kernel<uint16_t>, dim3(blocks_for(n)), dim3(kThreads), 0, stream, p, n, out);
}

void fold_max_abs_f32(const float* p, size_t n, float* out, void* stream) {
  if (n == 0) return;
  launch_kernel("max_abs_f32", max_abs_kernel<float>, dim3(blocks_for(n)), dim3(kThreads), 0, stream, p, n, out);
}

void bf16_to_f16(uint16_t* p, size_t n, void* stream) {
  if (n == 0) return;
  launch_kernel("bf16_to_f16", bf16_to_f16_kernel, dim3(blocks_for(n)), dim3(kThreads), 0, stream, p, n);
}

}  // namespace fs::cuda::kernels

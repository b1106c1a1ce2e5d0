// Counter-hash random fills.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/fill_ops.h"
#include "backends/cuda/kernels/launch.cuh"

namespace fs::cuda::kernels {

namespace {

// splitmix64 of (seed, i) → a float in [-1, 1) from its top 24 bits.
__host__ __device__ inline float unit(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(int32_t(z >> 40) - (1 << 23)) * (1.0f / float(1 << 23));
}

__global__ void fill_bf16_kernel(uint16_t* dst, size_t n, uint64_t seed, float scale, float offset) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = f32_to_bf16_bits(offset + scale * unit(seed, i));
}

__global__ void fill_f32_kernel(float* dst, size_t n, uint64_t seed, float scale, float offset) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = offset + scale * unit(seed, i);
}

constexpr int kFillThreads = 256;
constexpr unsigned kFillBlocks = 4096;

}  // namespace

float uniform_value(uint64_t seed, size_t i, float scale, float offset) { return offset + scale * unit(seed, i); }

void fill_uniform_bf16(uint16_t* dst, size_t n, uint64_t seed, float scale, float offset, void* stream) {
  if (n == 0) return;
  launch_kernel("fill_uniform_bf16", fill_bf16_kernel, dim3(kFillBlocks), dim3(kFillThreads), 0, stream, dst, n, seed,
                scale, offset);
}

void fill_uniform_f32(float* dst, size_t n, uint64_t seed, float scale, float offset, void* stream) {
  if (n == 0) return;
  launch_kernel("fill_uniform_f32", fill_f32_kernel, dim3(kFillBlocks), dim3(kFillThreads), 0, stream, dst, n, seed,
                scale, offset);
}

}  // namespace fs::cuda::kernels

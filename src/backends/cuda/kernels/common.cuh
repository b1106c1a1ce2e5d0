#pragma once
// Shared device helpers of the CUDA kernels: bf16 conversion, fixed-order warp reductions, stream casts.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backends/cuda/host/driver_types.h"
#include "core/error.h"

namespace fs::cuda::kernels {

inline cudaStream_t as_runtime(void* s) { return reinterpret_cast<cudaStream_t>(s); }

// Programmatic dependent launch (launch_overlapping_kernel): waits until the kernels this one follows have finished
// and their writes are visible; before it a kernel may only read what no kernel of the round writes (weights).
__device__ __forceinline__ void wait_for_previous_grid() {
#ifndef FS_CUDA_EMULATION  // the emulation runs launches one after another
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Programmatic dependent launch: lets the stream's next kernel be scheduled before this one finishes, so a GEMM
// after a short kernel starts its weight copies early. Short kernels call it first; the GEMMs and the recurrence
// once their last copies are issued, when all their CTAs are resident and the next kernel can take no slot they need.
__device__ __forceinline__ void let_next_grid_start() {
#ifndef FS_CUDA_EMULATION
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The block's dynamic shared memory as a 16-byte aligned array `name` of T.
#ifdef FS_CUDA_EMULATION
#define FS_DYNAMIC_SHARED(T, name) T* name = ::emulated::dynamic_shared<T>()
#else
#define FS_DYNAMIC_SHARED(T, name) extern __shared__ __align__(16) T name[]
#endif

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

// SwiGLU of one gate/up pair, rounded to bf16: the swiglu kernel and the gate|up GEMM's epilogue share it. The
// hardware's exp2 and reciprocal (a few ulps from the exact silu, far below bf16's rounding) keep the GEMM's epilogue
// short.
__device__ __forceinline__ uint16_t swiglu_bits(float g, float u) {
  return f32_to_bf16_bits(__fdividef(g, 1.0f + __expf(-g)) * u);
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Tree sum over the warp into lane 0, then broadcast: every lane gets the same bits.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return __shfl_sync(0xffffffffu, v, 0);
}

// Elements lane, lane + 32, … (below n) of p into x, every load issued before any is used; zeros past n.
template <int N>
__device__ __forceinline__ void load_lane_values(const float* p, int n, float (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int d = int(threadIdx.x % 32) + 32 * i;
    x[i] = d < n ? p[d] : 0.0f;
  }
}

// This lane's sum of squares over the values load_lane_values put in x (those below n), in d order.
template <int N>
__device__ __forceinline__ float lane_sum_squares(const float (&x)[N], int n) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (int(threadIdx.x % 32) + 32 * i < n) s = fmaf(x[i], x[i], s);
  return s;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace fs::cuda::kernels

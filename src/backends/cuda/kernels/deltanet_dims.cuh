#pragma once
// What the Gated DeltaNet kernel files share (included by the deltanet*.cu files only): the sizes the kernels use,
// checked on the host, the activations and the q/k normalisation.
#include <cmath>
#include <string>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/deltanet_ops.h"
#include "core/error.h"

namespace fs::cuda::kernels::deltanet_detail {

constexpr int kMaxConvKernel = 8;
constexpr int kMaxKeyDim = 128;
constexpr int kKeysPerLane = kMaxKeyDim / 32;  // values of one q or k head a lane holds

// The sizes the kernels use, from DeltaNetShape on the host.
struct Dims {
  int C = 0, KC = 0, V = 0, nv = 0, dk = 0, dv = 0, group = 0, K = 0;
  int64_t conv_state = 0;
  float q_scale = 0, eps = 0;
};

constexpr int kMaxGridRows = 65535;  // grid y and z limit: rows of the conv, sequences of a call

inline void check_batch(int T, const DeltaNetBatch& batch) {
  if (T > kMaxGridRows || batch.count > kMaxGridRows)
    throw Error("the CUDA DeltaNet kernels take up to " + std::to_string(kMaxGridRows) +
                " rows and sequences a call (got " + std::to_string(T) + " rows, " + std::to_string(batch.count) +
                " sequences)");
}

inline Dims dims_of(const DeltaNetShape& s) {
  if (s.key_heads <= 0 || s.value_heads % s.key_heads != 0 || s.key_dim <= 0 || s.key_dim > kMaxKeyDim ||
      s.value_dim <= 0 || s.conv_kernel < 1 || s.conv_kernel > kMaxConvKernel)
    throw Error("the CUDA DeltaNet kernels need value heads a multiple of key heads, key_dim 1.." +
                std::to_string(kMaxKeyDim) + " and conv kernel 1.." + std::to_string(kMaxConvKernel) + " (got " +
                std::to_string(s.value_heads) + "/" + std::to_string(s.key_heads) + " heads, key_dim " +
                std::to_string(s.key_dim) + ", conv kernel " + std::to_string(s.conv_kernel) + ")");
  Dims d;
  d.C = s.conv_channels();
  d.KC = s.key_channels();
  d.V = s.value_channels();
  d.nv = s.value_heads;
  d.dk = s.key_dim;
  d.dv = s.value_dim;
  d.group = s.value_heads / s.key_heads;
  d.K = s.conv_kernel;
  d.conv_state = int64_t(s.conv_state_floats());
  d.q_scale = float(1.0 / std::sqrt(double(s.key_dim)));
  d.eps = s.eps;
  return d;
}

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// x · rsqrt(Σx² + 1e-6) · scale over the n values a warp holds (lane's at lane + 32i), into dst.
__device__ __forceinline__ void l2_normalize(const float (&x)[kKeysPerLane], int n, float scale, float* dst) {
  const int lane = threadIdx.x % 32;
  const float inv = 1.0f / sqrtf(warp_sum(lane_sum_squares(x, n)) + 1e-6f);
#pragma unroll
  for (int i = 0; i < kKeysPerLane; ++i)
    if (lane + 32 * i < n) dst[lane + 32 * i] = (x[i] * inv) * scale;
}

}  // namespace fs::cuda::kernels::deltanet_detail

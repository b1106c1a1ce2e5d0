// Gated attention's query|gate split with q/k norm, partial rotary and the K/V store (a warp per (row, head)); the
// sigmoid output gate is applied by `attention` itself.
#include <string>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/gated_attention_ops.h"
#include "backends/cuda/kernels/launch.cuh"

namespace fs::cuda::kernels {

namespace {

constexpr int kMaxHeadDim = 256;

__global__ void gated_qkv_rope_store_kernel(const float* qkv, HeadShape shape, int rotary_dim, const float* q_norm,
                                            const float* k_norm, float eps, const float* cos, const float* sin,
                                            PagedKv kv, float* q, float* gate) {
  let_next_grid_start();
  wait_for_previous_grid();
  __shared__ float v[kMaxHeadDim];
  const int r = blockIdx.x, h = blockIdx.y, lane = threadIdx.x;
  const int hd = shape.head_dim, half = rotary_dim / 2, Q = shape.heads * hd, kv_width = shape.kv_heads * hd;
  const bool is_q = h < shape.heads;
  const int g = h - shape.heads;
  const float* row = qkv + size_t(r) * size_t(2 * Q + 2 * kv_width);
  const float* src = is_q ? row + size_t(h) * 2 * hd : row + 2 * Q + size_t(g) * hd;
  const float* norm = is_q ? q_norm : k_norm;
  float s = 0.0f;
  for (int d = lane; d < hd; d += 32) s = fmaf(src[d], src[d], s);
  const float inv = 1.0f / sqrtf(warp_sum(s) / float(hd) + eps);
  for (int d = lane; d < hd; d += 32) v[d] = norm[d] * (src[d] * inv);
  __syncwarp();
  const float* c = cos + size_t(r) * half;
  const float* sn = sin + size_t(r) * half;
  for (int i = lane; i < half; i += 32) {
    const float a = v[i], b = v[i + half];
    v[i] = a * c[i] - b * sn[i];  // each lane owns its pairs
    v[i + half] = b * c[i] + a * sn[i];
  }
  __syncwarp();
  if (is_q) {
    float* qo = q + (size_t(r) * shape.heads + h) * hd;
    float* go = gate + (size_t(r) * shape.heads + h) * hd;
    for (int d = lane; d < hd; d += 32) {
      qo[d] = v[d];
      go[d] = src[hd + d];
    }
    return;
  }
  const size_t slot = size_t(kv.row_slot[r]);
  uint16_t* ko = kv.keys + slot * kv_width + size_t(g) * hd;
  uint16_t* vo = kv.values + slot * kv_width + size_t(g) * hd;
  for (int d = lane; d < hd; d += 32) {
    ko[d] = f32_to_bf16_bits(v[d]);
    vo[d] = f32_to_bf16_bits(src[kv_width + d]);
  }
}

}  // namespace

void gated_qkv_rope_store(const float* qkv, int rows, HeadShape shape, int rotary_dim, const float* q_norm,
                          const float* k_norm, float eps, const float* cos, const float* sin, const PagedKv& kv,
                          float* q, float* gate, void* stream) {
  if (shape.head_dim > kMaxHeadDim || shape.head_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim < 0 ||
      rotary_dim > shape.head_dim || shape.kv_heads <= 0 || shape.heads % shape.kv_heads != 0)
    throw Error("gated_qkv_rope_store needs head_dim 1.." + std::to_string(kMaxHeadDim) +
                ", an even rotary_dim up to head_dim and heads divisible by kv_heads (got head_dim " +
                std::to_string(shape.head_dim) + ", rotary_dim " + std::to_string(rotary_dim) + ", " +
                std::to_string(shape.heads) + "/" + std::to_string(shape.kv_heads) + " heads)");
  if (rows == 0) return;
  launch_overlapping_kernel("gated_qkv_rope_store", gated_qkv_rope_store_kernel, dim3(rows, shape.heads + shape.kv_heads), dim3(32),
                0, stream, qkv, shape, rotary_dim, q_norm, k_norm, eps, cos, sin, kv, q, gate);
}

}  // namespace fs::cuda::kernels

// Gated attention's query|gate split with q/k norm, partial rotary and the K/V store (a warp per (row, head)); the
// sigmoid output gate is applied by `attention` itself.
#include <string>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/gated_attention_ops.h"
#include "backends/cuda/kernels/launch.cuh"

namespace fs::cuda::kernels {

namespace {

constexpr int kMaxHeadDim = 256;
constexpr int kPerLane = kMaxHeadDim / 32;
constexpr int kStoreWarps = 8;  // (row, head) pairs of a block, a warp each

// Every load of a (row, head) is issued at once into registers (the norm weights before the wait: no kernel writes
// them); the arithmetic is that of one pass after another: the sum of squares in d order per lane, then the rotation.
// A warp per (row, head), kStoreWarps of them a block.
__global__ void __launch_bounds__(kStoreWarps * 32)
    gated_qkv_rope_store_kernel(const float* qkv, int rows, HeadShape shape, int rotary_dim, const float* q_norm,
                                const float* k_norm, float eps, const float* cos, const float* sin, PagedKv kv,
                                float* q, float* gate) {
  let_next_grid_start();
  const int heads = shape.heads + shape.kv_heads, pair = blockIdx.x * kStoreWarps + threadIdx.x / 32;
  if (pair >= rows * heads) return;
  const int r = pair / heads, h = pair % heads, lane = threadIdx.x % 32;
  const int hd = shape.head_dim, half = rotary_dim / 2, Q = shape.heads * hd, kv_width = shape.kv_heads * hd;
  const bool is_q = h < shape.heads;
  const int g = h - shape.heads;
  float w[kPerLane];
  load_lane_values(is_q ? q_norm : k_norm, hd, w);
  wait_for_previous_grid();
  __shared__ float values[kStoreWarps][kMaxHeadDim];
  float* v = values[threadIdx.x / 32];
  const float* row = qkv + size_t(r) * size_t(2 * Q + 2 * kv_width);
  const float* src = is_q ? row + size_t(h) * 2 * hd : row + 2 * Q + size_t(g) * hd;
  // The head's values; then its gate (q heads, hd further on) or its values (k heads, kv_width further on).
  float x[kPerLane], c[kPerLane / 2], sn[kPerLane / 2], passed[kPerLane];
  load_lane_values(src, hd, x);
  load_lane_values(cos + size_t(r) * half, half, c);
  load_lane_values(sin + size_t(r) * half, half, sn);
  load_lane_values(src + (is_q ? hd : kv_width), hd, passed);
  const size_t slot = is_q ? 0 : size_t(kv.row_slot[r]);
  const float inv = 1.0f / sqrtf(warp_sum(lane_sum_squares(x, hd)) / float(hd) + eps);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (lane + 32 * i < hd) v[lane + 32 * i] = w[i] * (x[i] * inv);
  __syncwarp();
#pragma unroll
  for (int j = 0; j < kPerLane / 2; ++j) {
    const int i = lane + 32 * j;
    if (i >= half) break;
    const float a = v[i], b = v[i + half];
    v[i] = a * c[j] - b * sn[j];  // each lane owns its pairs
    v[i + half] = b * c[j] + a * sn[j];
  }
  __syncwarp();
  if (is_q) {
    float* qo = q + (size_t(r) * shape.heads + h) * hd;
    float* go = gate + (size_t(r) * shape.heads + h) * hd;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < hd) qo[d] = v[d], go[d] = passed[i];
    }
    return;
  }
  uint16_t* ko = kv.keys + slot * kv_width + size_t(g) * hd;
  uint16_t* vo = kv.values + slot * kv_width + size_t(g) * hd;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hd) ko[d] = f32_to_bf16_bits(v[d]), vo[d] = f32_to_bf16_bits(passed[i]);
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
  const int pairs = rows * (shape.heads + shape.kv_heads);
  launch_overlapping_kernel("gated_qkv_rope_store", gated_qkv_rope_store_kernel,
                            dim3((pairs + kStoreWarps - 1) / kStoreWarps), dim3(kStoreWarps * 32), 0, stream, qkv,
                            rows, shape, rotary_dim, q_norm, k_norm, eps, cos, sin, kv, q, gate);
}

}  // namespace fs::cuda::kernels

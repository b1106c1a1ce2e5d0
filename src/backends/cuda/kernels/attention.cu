// Per-head q/k norm + RoPE + KV store, and causal GQA attention over the paged KV cache: the tensor-core kernel of
// attention_mma.cuh for head_dim a multiple of 16 up to 256, else a plain kernel with one warp per (row, head) that
// visits keys in position order in tiles of 32. Either way a row's arithmetic depends only on its own key count.
#include "backends/cuda/kernels/attention_mma.cuh"
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/ops.h"

namespace fs::cuda::kernels {

namespace {

constexpr int kMaxHeadDim = 256;
constexpr int kPerLane = kMaxHeadDim / 32;
constexpr int kStoreWarps = 8;  // (row, head) pairs of a qkv_rope_store block, a warp each

// Every load of a (row, head) is issued at once into registers (the norm weights before the wait: no kernel writes
// them); the arithmetic is that of one pass after another: the optional norm's sum of squares in d order per lane,
// then the rotation. A warp per (row, head), kStoreWarps of them a block.
__global__ void __launch_bounds__(kStoreWarps * 32)
    qkv_rope_store_kernel(const float* qkv, int rows, HeadShape shape, const float* q_norm, const float* k_norm,
                          float eps, const float* cos, const float* sin, PagedKv kv, float* q) {
  let_next_grid_start();
  const int heads = shape.heads + shape.kv_heads, pair = blockIdx.x * kStoreWarps + threadIdx.x / 32;
  if (pair >= rows * heads) return;
  const int r = pair / heads, h = pair % heads, lane = threadIdx.x % 32;
  const int hd = shape.head_dim, half = hd / 2, kv_width = shape.kv_heads * hd;
  const bool is_q = h < shape.heads;
  const int g = h - shape.heads;
  const float* norm = is_q ? q_norm : k_norm;
  float w[kPerLane];
  if (norm) load_lane_values(norm, hd, w);
  wait_for_previous_grid();
  __shared__ float values[kStoreWarps][kMaxHeadDim];
  float* v = values[threadIdx.x / 32];
  const size_t row_width = size_t(shape.heads * hd + 2 * kv_width);
  const float* src = qkv + size_t(r) * row_width + (is_q ? size_t(h) * hd : size_t(shape.heads * hd + g * hd));
  // The head's values, its rows' cos and sin, and (k heads) the values kv_width further on.
  float x[kPerLane], c[kPerLane / 2], sn[kPerLane / 2], passed[kPerLane];
  load_lane_values(src, hd, x);
  load_lane_values(cos + size_t(r) * half, half, c);
  load_lane_values(sin + size_t(r) * half, half, sn);
  if (!is_q) load_lane_values(src + kv_width, hd, passed);
  const size_t slot = is_q ? 0 : size_t(kv.row_slot[r]);
  const float inv = norm ? 1.0f / sqrtf(warp_sum(lane_sum_squares(x, hd)) / float(hd) + eps) : 1.0f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (lane + 32 * i < hd) v[lane + 32 * i] = norm ? w[i] * (x[i] * inv) : x[i];
  __syncwarp();
  float* qo = is_q ? q + (size_t(r) * shape.heads + h) * hd : nullptr;
  uint16_t* ko = is_q ? nullptr : kv.keys + slot * kv_width + size_t(g) * hd;
#pragma unroll
  for (int j = 0; j < kPerLane / 2; ++j) {
    const int i = lane + 32 * j;
    if (i >= half) break;
    const float a = v[i], b = v[i + half];
    const float lo = a * c[j] - b * sn[j], hi = b * c[j] + a * sn[j];
    if (is_q) {
      qo[i] = lo;
      qo[i + half] = hi;
    } else {
      ko[i] = f32_to_bf16_bits(lo);
      ko[i + half] = f32_to_bf16_bits(hi);
    }
  }
  if (is_q) return;
  uint16_t* vo = kv.values + slot * kv_width + size_t(g) * hd;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (lane + 32 * i < hd) vo[lane + 32 * i] = f32_to_bf16_bits(passed[i]);
}

__global__ void plain_attention_kernel(const float* q, HeadShape shape, PagedKv kv, float scale, const float* gate,
                                       uint16_t* out) {
  wait_for_previous_grid();
  __shared__ float qs[kMaxHeadDim];
  const int r = blockIdx.x, h = blockIdx.y, lane = threadIdx.x;
  const int hd = shape.head_dim, kv_width = shape.kv_heads * hd;
  const int g = h / (shape.heads / shape.kv_heads);
  const float* qh = q + (size_t(r) * shape.heads + h) * hd;
  for (int d = lane; d < hd; d += 32) qs[d] = qh[d];
  __syncwarp();
  const int n = kv.row_keys[r];
  const int32_t* table = kv.pages + kv.row_table[r];
  float m = -INFINITY, l = 0.0f, acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) acc[i] = 0.0f;
  for (int base = 0; base < n; base += 32) {
    const int j = base + lane;
    float score = -INFINITY;
    size_t slot = 0;
    if (j < n) {
      slot = key_slot(kv, r, table, j);
      const __nv_bfloat162* k2 = reinterpret_cast<const __nv_bfloat162*>(kv.keys + slot * kv_width + size_t(g) * hd);
      float dot = 0.0f;
      for (int d = 0; d < hd / 2; ++d) {
        const float2 kf = __bfloat1622float2(k2[d]);
        dot = fmaf(qs[2 * d], kf.x, dot);
        dot = fmaf(qs[2 * d + 1], kf.y, dot);
      }
      score = dot * scale;
    }
    const float m_new = fmaxf(m, warp_max(score));
    const float p = j < n ? expf(score - m_new) : 0.0f;
    const float correction = expf(m - m_new);
    l = l * correction + warp_sum(p);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[i] *= correction;
    const int count = min(32, n - base);
    for (int t = 0; t < count; ++t) {
      const float pt = __shfl_sync(0xffffffffu, p, t);
      const size_t st = __shfl_sync(0xffffffffu, slot, t);
      const uint16_t* vt = kv.values + st * kv_width + size_t(g) * hd;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < hd) acc[i] = fmaf(pt, bf16_bits_to_f32(vt[d]), acc[i]);
      }
    }
    m = m_new;
  }
  const size_t at = (size_t(r) * shape.heads + h) * hd;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hd) out[at + d] = f32_to_bf16_bits(gate ? acc[i] / l * sigmoid(gate[at + d]) : acc[i] / l);
  }
}

void check_shape(HeadShape shape) {
  if (shape.head_dim > kMaxHeadDim || shape.head_dim % 2 != 0 || shape.kv_heads <= 0 ||
      shape.heads % shape.kv_heads != 0)
    throw Error("the CUDA attention kernels need an even head_dim up to " + std::to_string(kMaxHeadDim) +
                " and heads divisible by kv_heads (got head_dim " + std::to_string(shape.head_dim) + ", " +
                std::to_string(shape.heads) + "/" + std::to_string(shape.kv_heads) + " heads)");
}

}  // namespace

void plain_attention(const float* q, int rows, HeadShape shape, const PagedKv& kv, float scale, const float* gate,
                     uint16_t* out, void* stream) {
  check_shape(shape);
  if (rows == 0) return;
  dim3 grid(rows, shape.heads);
  launch_overlapping_kernel("plain_attention", plain_attention_kernel, grid, dim3(32), 0, stream, q, shape, kv, scale,
                            gate, out);
}

void qkv_rope_store(const float* qkv, int rows, HeadShape shape, const float* q_norm, const float* k_norm, float eps,
                    const float* cos, const float* sin, const PagedKv& kv, float* q, void* stream) {
  check_shape(shape);
  if (rows == 0) return;
  const int pairs = rows * (shape.heads + shape.kv_heads);
  launch_overlapping_kernel("qkv_rope_store", qkv_rope_store_kernel, dim3((pairs + kStoreWarps - 1) / kStoreWarps),
                            dim3(kStoreWarps * 32), 0, stream, qkv, rows, shape, q_norm, k_norm, eps, cos, sin, kv, q);
}

void attention(float* q, int rows, HeadShape shape, const PagedKv& kv, float scale, const float* gate,
               const AttentionSplit& split, uint16_t* out, void* stream, int lone_rows) {
  check_shape(shape);
  if (rows == 0) return;
  const cudaStream_t st = as_runtime(stream);
  switch (shape.head_dim % 16 == 0 ? shape.head_dim / 16 : 0) {
    case 1: attention_mma::launch<16>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 2: attention_mma::launch<32>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 3: attention_mma::launch<48>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 4: attention_mma::launch<64>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 5: attention_mma::launch<80>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 6: attention_mma::launch<96>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 7: attention_mma::launch<112>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 8: attention_mma::launch<128>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 9: attention_mma::launch<144>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 10: attention_mma::launch<160>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 11: attention_mma::launch<176>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 12: attention_mma::launch<192>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 13: attention_mma::launch<208>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 14: attention_mma::launch<224>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 15: attention_mma::launch<240>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    case 16: attention_mma::launch<256>(q, rows, lone_rows, shape, kv, scale, gate, split, out, st); break;
    default: plain_attention(q, rows, shape, kv, scale, gate, out, stream);
  }
}

}  // namespace fs::cuda::kernels

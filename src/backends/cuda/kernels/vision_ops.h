#pragma once
// Host entry points of the vision tower's own CUDA kernels (the GEMM and RMSNorm come from ops.h). Pointers are
// device addresses, f32 unless said otherwise; every call queues work on `stream` and throws fs::Error if the
// launch fails.
#include <cstdint>

namespace fs::cuda::kernels {

// Largest head_dim segment_attention handles.
inline constexpr int kVisionMaxHeadDim = 128;
// Most rows of one attention tile (rows of one segment that share each loaded block of keys).
inline constexpr int kVisionTileRows = 128;

// 2-D rotary in place on the q and k parts of qkv[rows, 3·heads·head_dim]: rotate-half with cos/sin
// [rows, head_dim/2], each product rounded separately as the CPU tower does.
void vision_rope_qk(float* qkv, int rows, int heads, int head_dim, const float* cos, const float* sin, void* stream);

// One attention tile: rows [row, row + count) attend to keys [key_begin, key_end) of their segment;
// 1 ≤ count ≤ kVisionTileRows.
struct AttentionTile {
  int32_t row = 0, count = 0, key_begin = 0, key_end = 0;
};

// Non-causal softmax attention of every tile's rows over its keys, per head, keys visited in increasing order
// (online softmax); q/k/v are the three parts of qkv[rows, 3·heads·head_dim]; out bf16 [rows, heads·head_dim].
// Head dims that are multiples of 8 run on tensor cores (q, k, v and the probabilities rounded to bf16, f32
// sums; qkv 16-byte aligned; a head of 8·odd dims computed with 8 zero dims added); other head dims on an f32
// kernel. Same input, same bits.
void segment_attention(const float* qkv, int heads, int head_dim, const AttentionTile* tiles, int tile_count,
                       float scale, uint16_t* out, void* stream);

// out[r, f] = silu(gu[r, f]) · gu[r, ffn + f] as bf16 for f < ffn and 0 for ffn ≤ f < out_stride (gu [rows, 2·ffn]).
void swiglu_padded(const float* gu, int rows, int ffn, int out_stride, uint16_t* out, void* stream);

// out[i] = x[i]·(1 + erf(x[i]/√2))/2 as bf16 (exact GELU).
void gelu_erf(const float* x, int64_t n, uint16_t* out, void* stream);

// y[r, :] = (x[r, :] − mean) / sqrt(var + eps) · weight + bias as bf16 (LayerNorm, biased variance).
void layer_norm_bf16(const float* x, const float* weight, const float* bias, int rows, int dim, float eps, uint16_t* y,
                     void* stream);

// out[r, f] = gelu(x[r, f]) as bf16 for f < cols (tanh approximation or exact erf) and 0 for cols ≤ f < out_stride.
void gelu_padded(const float* x, int rows, int cols, int out_stride, bool tanh_form, uint16_t* out, void* stream);

// x[r, :] += Σₖ grid[index[4r + k], :] · weight[4r + k] over the four taps (summed first, in order k = 0..3); grid
// rows of `dim` floats.
void add_position_taps(float* x, const float* grid, const int32_t* index, const float* weight, int rows, int dim,
                       void* stream);

// dst[index[r], :] = src[r, :] for r < rows (rows of `dim` floats).
void scatter_rows(const float* src, const int32_t* index, int rows, int dim, float* dst, void* stream);

}  // namespace fs::cuda::kernels

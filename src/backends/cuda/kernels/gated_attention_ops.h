#pragma once
// Host entry points of the gated-attention helpers of Qwen3.5 (CPU references: models/gated_attention.h). Same
// conventions as ops.h: device pointers, work queued on `stream`, fs::Error on a failed launch, each row computed
// from that row alone.
#include <cstdint>

#include "backends/cuda/kernels/ops.h"

namespace fs::cuda::kernels {

// Splits qkv f32 [rows, heads·2·head_dim + 2·kv_heads·head_dim] (per head its query then its gate, then k, then v)
// into q f32 [rows, heads, head_dim] and gate f32 [rows, heads·head_dim] (for `attention`'s gate); q and k get the per-head RMSNorm with
// q_norm/k_norm (weights with the +1 applied) and rotate-half rotary on their leading rotary_dim dims with cos/sin
// [rows, rotary_dim/2]; k and v go as bf16 into the paged cache at kv.row_slot, as qkv_rope_store.
void gated_qkv_rope_store(const float* qkv, int rows, HeadShape shape, int rotary_dim, const float* q_norm,
                          const float* k_norm, float eps, const float* cos, const float* sin, const PagedKv& kv,
                          float* q, float* gate, void* stream);

}  // namespace fs::cuda::kernels

#pragma once
// Causal attention over the paged K/V on the CPU: each row's keys and values go into its stream's pages, then each
// row attends to its stream's positions 0..pos, or for a tree row (SequenceChunk::row_parents) to the committed
// positions then its ancestors.
#include <span>

#include "models/model.h"

namespace fs {

class KvPool;

// Where each row of a forward pass sits: its position and its chunk (whose page table holds its K/V).
struct AttentionRows {
  std::span<const SequenceChunk> chunks;
  std::span<const int> positions;
  std::span<const int> chunk_of;
  const float* cos = nullptr;  // [T, rotary_dim / 2]
  const float* sin = nullptr;
};

// Head counts and size of an attention layer.
struct AttentionHeads {
  int heads = 0, kv_heads = 0, head_dim = 0;
};

// Copies each row's k and v [T, kv_heads · head_dim] into its position of pool layer `layer`.
void store_paged_kv(const AttentionRows& rows, int layer, const float* k, const float* v, KvPool& pool);

// Softmax attention of each row's query heads q [T, heads · head_dim] over its stream's keys 0..pos (a tree row:
// 0..start_pos-1, then its ancestors' slots and its own, root first), summed in that order, into out
// [T, heads · head_dim]. A tree row at depth d thus does the arithmetic of the chain row at start_pos + d.
void paged_attention(const AttentionRows& rows, const AttentionHeads& shape, KvPool& pool, int layer, const float* q,
                     float* out);

// Copies K and V of slot `from` to slot `to` in every layer of the host pool, both through the page table `pages`
// (a kept tree row moved to its chain position).
void move_paged_kv(KvPool& pool, std::span<const int32_t> pages, int from, int to);

}  // namespace fs

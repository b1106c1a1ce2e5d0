#pragma once
// The gated full-attention layer of Qwen3.5 on the CPU: q_proj gives a query and a gate per head, q/k RMSNorm
// (1 + w), rotary on the leading part of each head, causal attention over the paged K/V, output × sigmoid(gate).
#include <string>
#include <vector>

#include "backends/cpu/weight.h"
#include "models/model.h"
#include "models/paged_attention.h"

namespace fs {

class Checkpoint;
class KvPool;

struct GatedAttentionShape {
  int heads = 0, kv_heads = 0, head_dim = 0, rotary_dim = 0;
  float eps = 1e-6f;
};

struct GatedAttentionWeights {
  WeightMatrix q, k, v, o;                // q: [heads × 2 × head_dim, hidden], query and gate per head
  std::vector<float> q_norm, k_norm;      // 1 + w
  size_t bytes() const { return q.bytes() + k.bytes() + v.bytes() + o.bytes(); }
};

GatedAttentionWeights load_gated_attention(const Checkpoint& ck, const std::string& prefix,
                                           const GatedAttentionShape& shape, int hidden);

// Interleaved M-RoPE angles: rotary index i takes h when i % 3 == 1 and i < 3·sections[1], w when i % 3 == 2 and
// i < 3·sections[2], else t. positions3 [n, 3].
void interleaved_mrope_angles(const std::vector<float>& inv_freq, const std::vector<int>& sections,
                              const int* positions3, int n, float* cos, float* sin);

// The query side and keys of T rows: qg [T, heads × 2 × head_dim] (query | gate per head) → q and gate [T, heads ×
// head_dim]; q (from qg) and k [T, kv_heads × head_dim] (in place) get the per-head RMSNorm (weights already 1 + w)
// and rotary on their leading rotary_dim dims, cos/sin [T, rotary_dim / 2]. The CPU reference of the CUDA kernel.
void gated_attention_qk(const GatedAttentionShape& shape, const float* q_norm, const float* k_norm, const float* cos,
                        const float* sin, int T, const float* qg, float* q, float* gate, float* k);

// attn[i] *= sigmoid(gate[i]) for i < n.
void apply_output_gate(const float* gate, size_t n, float* attn);

// x [T, hidden] (already normed) → out [T, hidden]; the rows' K/V go into pool layer `kv_layer` first.
void gated_attention_forward(const GatedAttentionWeights& w, const GatedAttentionShape& shape, const float* x,
                             const AttentionRows& rows, KvPool& pool, int kv_layer, float* out);

}  // namespace fs

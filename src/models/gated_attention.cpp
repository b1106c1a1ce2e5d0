#include "models/gated_attention.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/ops.h"
#include "models/paged_attention.h"
#include "models/weights_loader.h"

namespace fs {

namespace {

// Rotates the first rotary_dim dims of each head (rotate-half layout within them); the rest pass through.
void partial_rope(float* x, int rows, int heads, int head_dim, int rotary_dim, const float* cos, const float* sin) {
  const int half = rotary_dim / 2;
  for (int r = 0; r < rows; ++r) {
    const float* c = cos + size_t(r) * half;
    const float* s = sin + size_t(r) * half;
    for (int h = 0; h < heads; ++h) {
      float* v = x + (size_t(r) * heads + size_t(h)) * head_dim;
      for (int i = 0; i < half; ++i) {
        float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

}  // namespace

GatedAttentionWeights load_gated_attention(const Checkpoint& ck, const std::string& p, const GatedAttentionShape& s,
                                           int hidden) {
  GatedAttentionWeights w;
  const int Q = s.heads * s.head_dim, KV = s.kv_heads * s.head_dim;
  w.q = load_matrix(ck, p + "q_proj.weight", 2 * Q, hidden);
  w.k = load_matrix(ck, p + "k_proj.weight", KV, hidden);
  w.v = load_matrix(ck, p + "v_proj.weight", KV, hidden);
  w.o = load_matrix(ck, p + "o_proj.weight", hidden, Q);
  w.q_norm = one_plus(load_vector(ck, p + "q_norm.weight", s.head_dim));
  w.k_norm = one_plus(load_vector(ck, p + "k_norm.weight", s.head_dim));
  return w;
}

void interleaved_mrope_angles(const std::vector<float>& inv_freq, const std::vector<int>& sections,
                              const int* positions3, int n, float* cos, float* sin) {
  const size_t half = inv_freq.size();
  std::vector<int> axis(half, 0);
  for (size_t i = 0; i < half; ++i) {
    if (i % 3 == 1 && i < size_t(3 * sections[1])) axis[i] = 1;
    else if (i % 3 == 2 && i < size_t(3 * sections[2])) axis[i] = 2;
  }
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < half; ++i) {
      float angle = float(positions3[size_t(r) * 3 + size_t(axis[i])]) * inv_freq[i];
      cos[size_t(r) * half + i] = std::cos(angle);
      sin[size_t(r) * half + i] = std::sin(angle);
    }
}

void gated_attention_qk(const GatedAttentionShape& s, const float* q_norm, const float* k_norm, const float* cos,
                        const float* sin, int T, const float* qg, float* q, float* gate, float* k) {
  const int hd = s.head_dim;
  // q_proj lays out [query | gate] per head.
  for (size_t hr = 0; hr < size_t(T) * s.heads; ++hr) {
    std::copy_n(qg + hr * 2 * hd, hd, q + hr * hd);
    std::copy_n(qg + hr * 2 * hd + hd, hd, gate + hr * hd);
  }
  cpu::rmsnorm(q, q_norm, T * s.heads, hd, s.eps, q);
  cpu::rmsnorm(k, k_norm, T * s.kv_heads, hd, s.eps, k);
  partial_rope(q, T, s.heads, hd, s.rotary_dim, cos, sin);
  partial_rope(k, T, s.kv_heads, hd, s.rotary_dim, cos, sin);
}

void apply_output_gate(const float* gate, size_t n, float* attn) {
  for (size_t i = 0; i < n; ++i) attn[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
}

void gated_attention_forward(const GatedAttentionWeights& w, const GatedAttentionShape& s, const float* x,
                             const AttentionRows& rows, KvPool& pool, int kv_layer, float* out) {
  const int T = int(rows.positions.size()), hd = s.head_dim, Q = s.heads * hd, KV = s.kv_heads * hd;
  std::vector<float> qg(size_t(T) * 2 * Q), q(size_t(T) * Q), gate(size_t(T) * Q), k(size_t(T) * KV),
      v(size_t(T) * KV), attn(size_t(T) * Q);
  cpu::matmul(x, T, w.q, nullptr, qg.data());
  cpu::matmul(x, T, w.k, nullptr, k.data());
  cpu::matmul(x, T, w.v, nullptr, v.data());
  gated_attention_qk(s, w.q_norm.data(), w.k_norm.data(), rows.cos, rows.sin, T, qg.data(), q.data(), gate.data(),
                     k.data());
  store_paged_kv(rows, kv_layer, k.data(), v.data(), pool);
  paged_attention(rows, {s.heads, s.kv_heads, hd}, pool, kv_layer, q.data(), attn.data());
  apply_output_gate(gate.data(), attn.size(), attn.data());
  cpu::matmul(attn.data(), T, w.o, nullptr, out);
}

}  // namespace fs

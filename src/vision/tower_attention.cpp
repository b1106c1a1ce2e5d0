#include "vision/tower_attention.h"

#include <algorithm>

#include "backends/cpu/ops.h"
#include "vision/program_weights.h"
#include "vision/tower_ops.h"

namespace fs::vision {

TowerAttentionWeights load_tower_attention(const Checkpoint& ck, const VisionBlockProgram& b) {
  TowerAttentionWeights w;
  w.qkv = load_part_matrix(ck, b.qkv);
  w.qkv_bias = load_part_floats(ck, b.qkv_bias);
  w.proj = load_part_matrix(ck, b.proj);
  w.proj_bias = load_part_floats(ck, b.proj_bias);
  return w;
}

void tower_attention(const TowerAttentionWeights& w, const VisionTowerConfig& c, const float* xn, int T,
                     const float* cos, const float* sin, const std::vector<int>& bounds, const CancelFlag* cancel,
                     float* out) {
  const int H = c.hidden_size, heads = c.num_heads, hd = c.head_dim();
  const size_t n = size_t(T) * size_t(H);
  std::vector<float> qkv(3 * n), q(n), k(n), v(n), attn(n);
  cpu::matmul(xn, T, w.qkv, w.qkv_bias.data(), qkv.data());
  for (int t = 0; t < T; ++t) {
    const float* r = &qkv[size_t(t) * 3 * H];
    std::copy_n(r, H, &q[size_t(t) * H]);
    std::copy_n(r + H, H, &k[size_t(t) * H]);
    std::copy_n(r + 2 * H, H, &v[size_t(t) * H]);
  }
  cpu::rope(q.data(), T, heads, hd, cos, sin);
  cpu::rope(k.data(), T, heads, hd, cos, sin);
  segment_attention(q, k, v, bounds, T, heads, hd, attn, cancel);
  cpu::matmul(attn.data(), T, w.proj, w.proj_bias.data(), out);
}

}  // namespace fs::vision

#include "vision/qwen2_5_vl_tower.h"

#include <algorithm>

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "vision/program_weights.h"
#include "vision/tower_ops.h"

namespace fs::vision {

Qwen25VisionTower::Qwen25VisionTower(const VisionTowerConfig& c, std::shared_ptr<Checkpoint> ck)
    : CpuTowerBase(c, std::move(ck), VisionTowerKind::Qwen2_5_VL, "Qwen2.5-VL") {
  for (const VisionBlockProgram& b : program_.blocks) {
    VisionBlockWeights w;
    w.norm1 = load_part_floats(*ck_, b.norm1.weight);
    w.norm2 = load_part_floats(*ck_, b.norm2.weight);
    w.attn = load_tower_attention(*ck_, b);
    w.gate = load_part_matrix(*ck_, b.mlp_in, 0);
    w.gate_bias = load_part_floats(*ck_, b.mlp_in_bias, 0);
    w.up = load_part_matrix(*ck_, b.mlp_in, 1);
    w.up_bias = load_part_floats(*ck_, b.mlp_in_bias, 1);
    w.down = load_part_matrix(*ck_, b.mlp_out);
    w.down_bias = load_part_floats(*ck_, b.mlp_out_bias);
    blocks_.push_back(std::move(w));
  }
  merger_.ln_q = load_part_floats(*ck_, program_.merger.norm.weight);
  merger_.mlp = load_merger_mlp(*ck_, program_.merger);
}

size_t Qwen25VisionTower::weight_bytes() const {
  size_t n = patch_embed_.bytes() + merger_.mlp.bytes();
  for (const auto& b : blocks_) n += b.attn.bytes() + b.gate.bytes() + b.up.bytes() + b.down.bytes();
  return n;
}

std::vector<float> Qwen25VisionTower::patch_embed(const PixelPatches& px, const VisionPass& pass) const {
  const VisionTowerConfig& c = program_.config;
  const int T = pass.tokens, D = c.patch_dim(), H = c.hidden_size, unit = c.merge_unit();
  check_patches(px, T, c);
  // Gather the patches into window order first; the embedding is row-wise, so order does not change any row.
  std::vector<float> ordered(px.values.size());
  size_t row = 0;
  for (int u : pass.window_index)
    for (int k = 0; k < unit; ++k, ++row)
      std::copy_n(&px.values[(size_t(u) * unit + size_t(k)) * D], D, &ordered[row * size_t(D)]);
  std::vector<float> hidden(size_t(T) * size_t(H));
  cpu::matmul(ordered.data(), T, patch_embed_, nullptr, hidden.data());
  return hidden;
}

void Qwen25VisionTower::block(int index, const VisionPass& pass, std::vector<float>& x, const CancelFlag* cancel) const {
  const VisionBlockWeights& w = blocks_.at(size_t(index));
  const VisionTowerConfig& c = program_.config;
  const int T = pass.tokens, H = c.hidden_size, F = c.intermediate_size;
  const float eps = program_.eps;
  std::vector<float> xn(x.size());
  cpu::rmsnorm(x.data(), w.norm1.data(), T, H, eps, xn.data());
  const auto& bounds = program_.blocks.at(size_t(index)).full_attention ? pass.frame_bounds : pass.window_bounds;
  tower_attention(w.attn, c, xn.data(), T, pass.cos.data(), pass.sin.data(), bounds, cancel, xn.data());
  add_in_place(x, xn);
  std::vector<float> gate(size_t(T) * F), up(size_t(T) * F);
  cpu::rmsnorm(x.data(), w.norm2.data(), T, H, eps, xn.data());
  cpu::matmul(xn.data(), T, w.gate, w.gate_bias.data(), gate.data());
  cpu::matmul(xn.data(), T, w.up, w.up_bias.data(), up.data());
  cpu::swiglu(gate.data(), up.data(), gate.size(), gate.data());
  cpu::matmul(gate.data(), T, w.down, w.down_bias.data(), xn.data());
  add_in_place(x, xn);
}

std::vector<float> Qwen25VisionTower::merge(const VisionPass& pass, const std::vector<float>& x) const {
  const VisionTowerConfig& c = program_.config;
  const int T = pass.tokens, H = c.hidden_size, U = T / c.merge_unit(), O = c.out_hidden_size;
  std::vector<float> xn(x.size());
  cpu::rmsnorm(x.data(), merger_.ln_q.data(), T, H, program_.eps, xn.data());
  const std::vector<float> merged = merger_mlp(merger_.mlp, xn.data(), U);
  // Undo the window reordering: window slot i holds merged unit window_index[i].
  std::vector<float> out(merged.size());
  for (int i = 0; i < U; ++i)
    std::copy_n(&merged[size_t(i) * O], O, &out[size_t(pass.window_index[size_t(i)]) * O]);
  return out;
}

}  // namespace fs::vision

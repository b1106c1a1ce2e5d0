#include "vision/qwen2_5_vl_tower.h"

#include <algorithm>

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/weights_loader.h"
#include "vision/tower_ops.h"

namespace fs::vision {

Qwen25VisionTower::Qwen25VisionTower(const VisionTowerConfig& c, std::shared_ptr<Checkpoint> ck)
    : config_(c), ck_(std::move(ck)) {
  if (c.kind != VisionTowerKind::Qwen2_5_VL) throw Error("the vision_config does not describe a Qwen2.5-VL tower");
  const std::string p = visual_prefix(*ck_);
  const int H = c.hidden_size, F = c.intermediate_size;
  patch_embed_ = load_patch_embed(*ck_, p + "patch_embed.proj.weight", H, c);
  for (int i = 0; i < c.depth; ++i) {
    const std::string b = p + "blocks." + std::to_string(i) + ".";
    VisionBlockWeights w;
    w.norm1 = load_vector(*ck_, b + "norm1.weight", H);
    w.norm2 = load_vector(*ck_, b + "norm2.weight", H);
    w.attn = load_tower_attention(*ck_, b + "attn.", H);
    w.gate = load_matrix(*ck_, b + "mlp.gate_proj.weight", F, H);
    w.gate_bias = load_vector(*ck_, b + "mlp.gate_proj.bias", F);
    w.up = load_matrix(*ck_, b + "mlp.up_proj.weight", F, H);
    w.up_bias = load_vector(*ck_, b + "mlp.up_proj.bias", F);
    w.down = load_matrix(*ck_, b + "mlp.down_proj.weight", H, F);
    w.down_bias = load_vector(*ck_, b + "mlp.down_proj.bias", H);
    blocks_.push_back(std::move(w));
  }
  merger_.ln_q = load_vector(*ck_, p + "merger.ln_q.weight", H);
  merger_.mlp = load_merger_mlp(*ck_, p + "merger.mlp.0.", p + "merger.mlp.2.", c);
}

size_t Qwen25VisionTower::weight_bytes() const {
  size_t n = patch_embed_.bytes() + merger_.mlp.bytes();
  for (const auto& b : blocks_) n += b.attn.bytes() + b.gate.bytes() + b.up.bytes() + b.down.bytes();
  return n;
}

std::vector<float> Qwen25VisionTower::patch_embed(const PixelPatches& px, const WindowPlan& plan) const {
  const int T = plan.tokens, D = config_.patch_dim(), H = config_.hidden_size, unit = config_.merge_unit();
  check_patches(px, T, config_);
  // Gather the patches into window order first; the embedding is row-wise, so order does not change any row.
  std::vector<float> ordered(px.values.size());
  size_t row = 0;
  for (int u : plan.window_index)
    for (int k = 0; k < unit; ++k, ++row)
      std::copy_n(&px.values[(size_t(u) * unit + size_t(k)) * D], D, &ordered[row * size_t(D)]);
  std::vector<float> hidden(size_t(T) * size_t(H));
  cpu::matmul(ordered.data(), T, patch_embed_, nullptr, hidden.data());
  return hidden;
}

void Qwen25VisionTower::block(int index, const WindowPlan& plan, std::vector<float>& x, const CancelFlag* cancel) const {
  const VisionBlockWeights& w = blocks_.at(size_t(index));
  const int T = plan.tokens, H = config_.hidden_size, F = config_.intermediate_size;
  const float eps = config_.rms_norm_eps;
  std::vector<float> xn(x.size());
  cpu::rmsnorm(x.data(), w.norm1.data(), T, H, eps, xn.data());
  const auto& bounds = config_.full_attention(index) ? plan.frame_bounds : plan.window_bounds;
  tower_attention(w.attn, config_, xn.data(), T, plan.cos.data(), plan.sin.data(), bounds, cancel, xn.data());
  add_in_place(x, xn);
  std::vector<float> gate(size_t(T) * F), up(size_t(T) * F);
  cpu::rmsnorm(x.data(), w.norm2.data(), T, H, eps, xn.data());
  cpu::matmul(xn.data(), T, w.gate, w.gate_bias.data(), gate.data());
  cpu::matmul(xn.data(), T, w.up, w.up_bias.data(), up.data());
  cpu::swiglu(gate.data(), up.data(), gate.size(), gate.data());
  cpu::matmul(gate.data(), T, w.down, w.down_bias.data(), xn.data());
  add_in_place(x, xn);
}

std::vector<float> Qwen25VisionTower::merge(const WindowPlan& plan, const std::vector<float>& x) const {
  const int T = plan.tokens, H = config_.hidden_size, U = T / config_.merge_unit(), O = config_.out_hidden_size;
  std::vector<float> xn(x.size());
  cpu::rmsnorm(x.data(), merger_.ln_q.data(), T, H, config_.rms_norm_eps, xn.data());
  const std::vector<float> merged = merger_mlp(merger_.mlp, xn.data(), U);
  // Undo the window reordering: window slot i holds merged unit window_index[i].
  std::vector<float> out(merged.size());
  for (int i = 0; i < U; ++i)
    std::copy_n(&merged[size_t(i) * O], O, &out[size_t(plan.window_index[size_t(i)]) * O]);
  return out;
}

std::vector<float> Qwen25VisionTower::encode(const PixelPatches& patches, const CancelFlag* cancel) const {
  const WindowPlan plan = plan_windows(patches.grid, config_);
  std::vector<float> hidden = patch_embed(patches, plan);
  run_blocks(config_.depth, cancel, [&](int i) { block(i, plan, hidden, cancel); });
  return merge(plan, hidden);
}

}  // namespace fs::vision

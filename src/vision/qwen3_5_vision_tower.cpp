#include "vision/qwen3_5_vision_tower.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/vision_position_grid.h"
#include "models/weights_loader.h"
#include "vision/tower_ops.h"

namespace fs::vision {

Qwen35VisionTower::Qwen35VisionTower(const VisionTowerConfig& c, std::shared_ptr<Checkpoint> ck)
    : config_(c), ck_(std::move(ck)) {
  if (c.kind != VisionTowerKind::Qwen3_5) throw Error("the vision_config does not describe a Qwen3.5 tower");
  const std::string p = visual_prefix(*ck_);
  const int H = c.hidden_size, F = c.intermediate_size;
  patch_embed_ = load_patch_embed(*ck_, p + "patch_embed.proj.weight", H, c);
  patch_bias_ = load_vector(*ck_, p + "patch_embed.proj.bias", H);
  pos_embed_ = load_floats(*ck_, p + "pos_embed.weight", {c.num_position_embeddings, H});
  for (int i = 0; i < c.depth; ++i) {
    const std::string b = p + "blocks." + std::to_string(i) + ".";
    Qwen35VisionBlockWeights w;
    w.norm1_w = load_vector(*ck_, b + "norm1.weight", H);
    w.norm1_b = load_vector(*ck_, b + "norm1.bias", H);
    w.norm2_w = load_vector(*ck_, b + "norm2.weight", H);
    w.norm2_b = load_vector(*ck_, b + "norm2.bias", H);
    w.attn = load_tower_attention(*ck_, b + "attn.", H);
    w.fc1 = load_matrix(*ck_, b + "mlp.linear_fc1.weight", F, H);
    w.fc1_bias = load_vector(*ck_, b + "mlp.linear_fc1.bias", F);
    w.fc2 = load_matrix(*ck_, b + "mlp.linear_fc2.weight", H, F);
    w.fc2_bias = load_vector(*ck_, b + "mlp.linear_fc2.bias", H);
    blocks_.push_back(std::move(w));
  }
  merger_.norm_w = load_vector(*ck_, p + "merger.norm.weight", H);
  merger_.norm_b = load_vector(*ck_, p + "merger.norm.bias", H);
  merger_.mlp = load_merger_mlp(*ck_, p + "merger.linear_fc1.", p + "merger.linear_fc2.", c);
}

size_t Qwen35VisionTower::weight_bytes() const {
  size_t n = patch_embed_.bytes() + pos_embed_.size() * sizeof(float) + merger_.mlp.bytes();
  for (const auto& b : blocks_) n += b.attn.bytes() + b.fc1.bytes() + b.fc2.bytes();
  return n;
}

Qwen35TowerPlan Qwen35VisionTower::plan(const ImageGrid& g) const {
  Qwen35TowerPlan p;
  p.tokens = int(g.patches());
  for (int t = 0; t <= g.t; ++t) p.frame_bounds.push_back(t * g.h * g.w);
  const std::vector<float> angles =
      axial_rotary_angles(g, config_.head_dim(), config_.rope_theta, config_.spatial_merge_size);
  p.cos.resize(angles.size());
  p.sin.resize(angles.size());
  for (size_t i = 0; i < angles.size(); ++i) {
    p.cos[i] = std::cos(angles[i]);
    p.sin[i] = std::sin(angles[i]);
  }
  return p;
}

std::vector<float> Qwen35VisionTower::patch_embed(const PixelPatches& px) const {
  const int H = config_.hidden_size;
  const int64_t T = px.grid.patches();
  check_patches(px, T, config_);
  std::vector<float> hidden(size_t(T) * size_t(H));
  cpu::matmul(px.values.data(), int(T), patch_embed_, patch_bias_.data(), hidden.data());
  // The learned position grid, resampled to this image: a weighted sum of four grid rows per patch.
  const PositionTaps taps = position_grid_taps(px.grid, config_.position_grid_side(), config_.spatial_merge_size);
  std::vector<float> pos(static_cast<size_t>(H));
  for (int64_t t = 0; t < T; ++t) {
    std::fill(pos.begin(), pos.end(), 0.0f);
    for (size_t k = size_t(t) * 4; k < size_t(t) * 4 + 4; ++k) {
      const float* grid_row = &pos_embed_[size_t(taps.index[k]) * size_t(H)];
      for (int i = 0; i < H; ++i) pos[size_t(i)] += grid_row[i] * taps.weight[k];
    }
    float* row = &hidden[size_t(t) * size_t(H)];
    for (int i = 0; i < H; ++i) row[i] += pos[size_t(i)];
  }
  return hidden;
}

void Qwen35VisionTower::block(int index, const Qwen35TowerPlan& plan, std::vector<float>& x,
                              const CancelFlag* cancel) const {
  const Qwen35VisionBlockWeights& w = blocks_.at(size_t(index));
  const int T = plan.tokens, H = config_.hidden_size, F = config_.intermediate_size;
  constexpr float eps = 1e-6f;
  std::vector<float> xn(x.size());
  layer_norm(x.data(), w.norm1_w.data(), w.norm1_b.data(), T, H, eps, xn.data());
  tower_attention(w.attn, config_, xn.data(), T, plan.cos.data(), plan.sin.data(), plan.frame_bounds, cancel,
                  xn.data());
  add_in_place(x, xn);
  std::vector<float> mid(size_t(T) * F);
  layer_norm(x.data(), w.norm2_w.data(), w.norm2_b.data(), T, H, eps, xn.data());
  cpu::matmul(xn.data(), T, w.fc1, w.fc1_bias.data(), mid.data());
  if (config_.tanh_gelu)
    gelu_tanh(mid);
  else
    gelu_erf(mid);
  cpu::matmul(mid.data(), T, w.fc2, w.fc2_bias.data(), xn.data());
  add_in_place(x, xn);
}

std::vector<float> Qwen35VisionTower::merge(const std::vector<float>& x) const {
  const int H = config_.hidden_size, T = int(x.size() / size_t(H)), U = T / config_.merge_unit();
  std::vector<float> xn(x.size());
  // Each token is normalised on its own; a merge block's tokens are consecutive, so [U, M] is the same memory.
  layer_norm(x.data(), merger_.norm_w.data(), merger_.norm_b.data(), T, H, 1e-6f, xn.data());
  return merger_mlp(merger_.mlp, xn.data(), U);
}

std::vector<float> Qwen35VisionTower::encode(const PixelPatches& patches, const CancelFlag* cancel) const {
  const Qwen35TowerPlan p = plan(patches.grid);
  std::vector<float> hidden = patch_embed(patches);
  run_blocks(config_.depth, cancel, [&](int i) { block(i, p, hidden, cancel); });
  return merge(hidden);
}

}  // namespace fs::vision

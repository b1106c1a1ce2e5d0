#include "vision/qwen3_5_vision_tower.h"

#include <algorithm>

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "vision/program_weights.h"
#include "vision/tower_ops.h"

namespace fs::vision {

Qwen35VisionTower::Qwen35VisionTower(const VisionTowerConfig& c, std::shared_ptr<Checkpoint> ck)
    : CpuTowerBase(c, std::move(ck), VisionTowerKind::Qwen3_5, "Qwen3.5") {
  patch_bias_ = load_part_floats(*ck_, program_.patch_bias);
  pos_embed_ = load_part_floats(*ck_, program_.position_grid);
  for (const VisionBlockProgram& b : program_.blocks) {
    Qwen35VisionBlockWeights w;
    w.norm1_w = load_part_floats(*ck_, b.norm1.weight);
    w.norm1_b = load_part_floats(*ck_, b.norm1.bias);
    w.norm2_w = load_part_floats(*ck_, b.norm2.weight);
    w.norm2_b = load_part_floats(*ck_, b.norm2.bias);
    w.attn = load_tower_attention(*ck_, b);
    w.fc1 = load_part_matrix(*ck_, b.mlp_in);
    w.fc1_bias = load_part_floats(*ck_, b.mlp_in_bias);
    w.fc2 = load_part_matrix(*ck_, b.mlp_out);
    w.fc2_bias = load_part_floats(*ck_, b.mlp_out_bias);
    blocks_.push_back(std::move(w));
  }
  merger_.norm_w = load_part_floats(*ck_, program_.merger.norm.weight);
  merger_.norm_b = load_part_floats(*ck_, program_.merger.norm.bias);
  merger_.mlp = load_merger_mlp(*ck_, program_.merger);
}

size_t Qwen35VisionTower::weight_bytes() const {
  size_t n = patch_embed_.bytes() + pos_embed_.size() * sizeof(float) + merger_.mlp.bytes();
  for (const auto& b : blocks_) n += b.attn.bytes() + b.fc1.bytes() + b.fc2.bytes();
  return n;
}

std::vector<float> Qwen35VisionTower::patch_embed(const PixelPatches& px, const VisionPass& pass) const {
  const int H = program_.config.hidden_size;
  const int64_t T = pass.tokens;
  check_patches(px, T, program_.config);
  std::vector<float> hidden(size_t(T) * size_t(H));
  cpu::matmul(px.values.data(), int(T), patch_embed_, patch_bias_.data(), hidden.data());
  // The learned position grid, resampled to this image: a weighted sum of four grid rows per patch.
  const PositionTaps& taps = pass.taps;
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

void Qwen35VisionTower::block(int index, const VisionPass& pass, std::vector<float>& x, const CancelFlag* cancel) const {
  const Qwen35VisionBlockWeights& w = blocks_.at(size_t(index));
  const VisionTowerConfig& c = program_.config;
  const int T = pass.tokens, H = c.hidden_size, F = c.intermediate_size;
  const float eps = program_.eps;
  std::vector<float> xn(x.size());
  layer_norm(x.data(), w.norm1_w.data(), w.norm1_b.data(), T, H, eps, xn.data());
  tower_attention(w.attn, c, xn.data(), T, pass.cos.data(), pass.sin.data(), pass.frame_bounds, cancel, xn.data());
  add_in_place(x, xn);
  std::vector<float> mid(size_t(T) * F);
  layer_norm(x.data(), w.norm2_w.data(), w.norm2_b.data(), T, H, eps, xn.data());
  cpu::matmul(xn.data(), T, w.fc1, w.fc1_bias.data(), mid.data());
  if (program_.mlp == VisionMlp::GeluTanh)
    gelu_tanh(mid);
  else
    gelu_erf(mid);
  cpu::matmul(mid.data(), T, w.fc2, w.fc2_bias.data(), xn.data());
  add_in_place(x, xn);
}

std::vector<float> Qwen35VisionTower::merge(const VisionPass& pass, const std::vector<float>& x) const {
  const int H = program_.config.hidden_size, T = pass.tokens, U = T / program_.config.merge_unit();
  std::vector<float> xn(x.size());
  // Each token is normalised on its own; a merge block's tokens are consecutive, so [U, M] is the same memory.
  layer_norm(x.data(), merger_.norm_w.data(), merger_.norm_b.data(), T, H, program_.eps, xn.data());
  return merger_mlp(merger_.mlp, xn.data(), U);
}

}  // namespace fs::vision

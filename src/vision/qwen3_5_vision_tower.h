#pragma once
// The Qwen3.5 vision tower on the CPU, as separate units (patch embedding with the learned position grid, each
// block, the merger): LayerNorm + GELU blocks, 2-D rotary, full attention within each image frame.
#include <memory>
#include <vector>

#include "backends/cpu/weight.h"
#include "vision/cpu_tower_base.h"
#include "vision/tower_attention.h"
#include "vision/tower_ops.h"

namespace fs::vision {

struct Qwen35VisionBlockWeights {
  std::vector<float> norm1_w, norm1_b, norm2_w, norm2_b, fc1_bias, fc2_bias;
  TowerAttentionWeights attn;
  WeightMatrix fc1, fc2;
};

struct Qwen35VisionMergerWeights {
  std::vector<float> norm_w, norm_b;
  MergerMlpWeights mlp;
};

class Qwen35VisionTower : public CpuTowerBase<Qwen35VisionTower> {
 public:
  // Loads the tensors the tower's program names; throws fs::Error naming a missing or misshapen tensor.
  Qwen35VisionTower(const VisionTowerConfig& config, std::shared_ptr<Checkpoint> checkpoint);

  size_t weight_bytes() const;

  // The units, over the image's vision_pass(program(), grid): hidden states are [tokens, hidden_size] in the
  // processor's merge-block order.
  std::vector<float> patch_embed(const PixelPatches& patches, const VisionPass& pass) const;
  void block(int index, const VisionPass& pass, std::vector<float>& hidden, const CancelFlag* cancel = nullptr) const;
  std::vector<float> merge(const VisionPass& pass, const std::vector<float>& hidden) const;

 private:
  std::vector<float> patch_bias_;
  std::vector<float> pos_embed_;  // [num_position_embeddings, hidden_size]
  std::vector<Qwen35VisionBlockWeights> blocks_;
  Qwen35VisionMergerWeights merger_;
};

}  // namespace fs::vision

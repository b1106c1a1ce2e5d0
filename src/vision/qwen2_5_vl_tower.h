#pragma once
// The Qwen2.5-VL vision tower on the CPU, as separate units (patch embedding, each block, the merger) so that a
// staged-weights or device version can run them one at a time.
#include <memory>
#include <vector>

#include "backends/cpu/weight.h"
#include "vision/cpu_tower_base.h"
#include "vision/tower_attention.h"
#include "vision/tower_ops.h"

namespace fs::vision {

struct VisionBlockWeights {
  std::vector<float> norm1, norm2, gate_bias, up_bias, down_bias;
  TowerAttentionWeights attn;
  WeightMatrix gate, up, down;
};

struct VisionMergerWeights {
  std::vector<float> ln_q;
  MergerMlpWeights mlp;
};

class Qwen25VisionTower : public CpuTowerBase<Qwen25VisionTower> {
 public:
  // Loads the tensors the tower's program names; throws fs::Error naming a missing or misshapen tensor.
  Qwen25VisionTower(const VisionTowerConfig& config, std::shared_ptr<Checkpoint> checkpoint);

  size_t weight_bytes() const;

  // The units, for callers that schedule them, over the image's vision_pass(program(), grid): hidden states are
  // [tokens, hidden_size] in window order.
  std::vector<float> patch_embed(const PixelPatches& patches, const VisionPass& pass) const;
  void block(int index, const VisionPass& pass, std::vector<float>& hidden, const CancelFlag* cancel = nullptr) const;
  std::vector<float> merge(const VisionPass& pass, const std::vector<float>& hidden) const;

 private:
  std::vector<VisionBlockWeights> blocks_;
  VisionMergerWeights merger_;
};

}  // namespace fs::vision

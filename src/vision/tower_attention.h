#pragma once
// The attention half of a vision tower block on the CPU, as both towers run it: the fused qkv projection, 2-D
// rotary on q and k, attention inside segments of tokens, the output projection.
#include <vector>

#include "backends/cpu/weight.h"
#include "models/encode_cancel.h"
#include "models/vision_program.h"
#include "models/vision_tower_config.h"

namespace fs::vision {

struct TowerAttentionWeights {
  WeightMatrix qkv, proj;
  std::vector<float> qkv_bias, proj_bias;
  size_t bytes() const { return qkv.bytes() + proj.bytes(); }
};

// The block's qkv and output projections with their biases, as the program names them.
TowerAttentionWeights load_tower_attention(const Checkpoint& ck, const VisionBlockProgram& block);

// xn [tokens, hidden] (normed) → out [tokens, hidden]; cos/sin [tokens, head_dim / 2]; each token attends within
// its segment of `bounds`. Throws EncodeCancelled once `cancel` is set.
void tower_attention(const TowerAttentionWeights& w, const VisionTowerConfig& config, const float* xn, int tokens,
                     const float* cos, const float* sin, const std::vector<int>& bounds, const CancelFlag* cancel,
                     float* out);

}  // namespace fs::vision

#pragma once
// CPU pieces the vision towers share: the Conv3d patch embedding as a matrix, attention inside segments of
// tokens, LayerNorm, the GELUs and residual adds.
#include <string>
#include <vector>

#include "backends/cpu/weight.h"
#include "vision/encode_cancel.h"
#include "vision/vision_tower_config.h"

namespace fs {
class Checkpoint;
}

namespace fs::vision {

// The conv3d kernel [hidden, channels, temporal, patch, patch] flattened to an fp32 [hidden, patch_dim] matrix.
WeightMatrix load_patch_embed(const Checkpoint& ck, const std::string& name, int hidden, const VisionTowerConfig& c);

// Softmax attention of every query over the keys of its own segment (bounds), per head; q/k/v [tokens, heads·hd].
// Stops early, throwing EncodeCancelled, once `cancel` is set.
void segment_attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                       const std::vector<int>& bounds, int tokens, int heads, int hd, std::vector<float>& out,
                       const CancelFlag* cancel);

// y = (x − mean) / sqrt(var + eps) · weight + bias over `rows` vectors of `dim` (biased variance, as torch).
void layer_norm(const float* x, const float* weight, const float* bias, int rows, int dim, float eps, float* y);

// In place: exact GELU, x·Φ(x).
void gelu_erf(std::vector<float>& x);
// In place: GELU with the tanh approximation (gelu_pytorch_tanh).
void gelu_tanh(std::vector<float>& x);

void add_in_place(std::vector<float>& x, const std::vector<float>& y);

}  // namespace fs::vision

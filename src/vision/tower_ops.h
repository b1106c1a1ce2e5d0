#pragma once
// CPU pieces the vision towers share: the patch check, attention inside segments of tokens, LayerNorm, the GELUs,
// residual adds, the merger MLP and the block loop.
#include <functional>
#include <vector>

#include "backends/cpu/weight.h"
#include "models/encode_cancel.h"
#include "models/vision_program.h"
#include "models/vision_tower_config.h"
#include "vision/image_processor.h"

namespace fs::vision {

// Throws unless the patches hold `tokens` patches of the tower's patch_dim values.
void check_patches(const PixelPatches& patches, int64_t tokens, const VisionTowerConfig& c);

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

// The merger's MLP: fc1 [merged, merged], exact GELU, fc2 [out_hidden, merged], both with biases.
struct MergerMlpWeights {
  WeightMatrix fc1, fc2;
  std::vector<float> fc1_bias, fc2_bias;
  size_t bytes() const { return fc1.bytes() + fc2.bytes(); }
};

// fc1 and fc2 with their biases, as the program's merger names them.
MergerMlpWeights load_merger_mlp(const Checkpoint& ck, const VisionMergerProgram& merger);

// xn [units, merged] (normed) → [units, out_hidden].
std::vector<float> merger_mlp(const MergerMlpWeights& w, const float* xn, int units);

// block(i) for each of `depth` blocks in order, checking `cancel` before each and after the last.
void run_blocks(int depth, const CancelFlag* cancel, const std::function<void(int)>& block);

}  // namespace fs::vision

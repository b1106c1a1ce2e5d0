#pragma once
// A vision tower as data every backend runs: the checkpoint tensors it reads (names, shapes, how they stack), its
// block sequence and its conventions (patch embedding, positions, norms, MLP, merger). A tower family file builds
// one from the vision_config; a backend's runner places the tensors and runs the steps with its own ops.
#include <string>
#include <vector>

#include "models/model_program.h"
#include "models/vision_tower_config.h"

namespace fs {

// How a patch's position enters: 2-D rotary on q and k only, or also a learned square grid resampled bilinearly
// (align_corners) to the image and added to the patch embedding.
enum class VisionPositions { Rotary, LearnedGridAndRotary };

// RMSNorm (weight only) or LayerNorm (weight and bias, biased variance).
enum class VisionNorm { Rms, LayerNorm };

// A block's MLP: out(silu(gate·x) ⊙ up·x) with gate|up stacked in `in`, or out(gelu(in·x)) with GELU's tanh
// approximation or its exact erf form.
enum class VisionMlp { SwiGlu, GeluTanh, GeluErf };

struct VisionNormRef {
  VectorRef weight, bias;  // bias empty for RMSNorm
};

// x += proj(attention(rope(qkv·norm1(x)))), inside each window or over the whole frame; x += mlp(norm2(x)).
struct VisionBlockProgram {
  VisionNormRef norm1, norm2;
  MatrixRef qkv, proj, mlp_in, mlp_out;
  VectorRef qkv_bias, proj_bias, mlp_in_bias, mlp_out_bias;
  bool full_attention = true;  // false: attention inside each window
};

// Each token normed, merge_unit consecutive tokens as one row, out(gelu_erf(fc1·row)).
struct VisionMergerProgram {
  VisionNormRef norm;
  MatrixRef fc1, fc2;
  VectorRef fc1_bias, fc2_bias;
};

struct VisionProgram {
  std::string family;  // for messages: "qwen2.5-vl", "qwen3.5"
  std::string prefix;  // where the tower's tensors live: "visual." or "model.visual."
  vision::VisionTowerConfig config;
  TensorPart patch_embed;  // conv3d [hidden, channels, temporal, patch, patch], read as [hidden, patch_dim]
  VectorRef patch_bias;    // empty → none
  VisionPositions positions = VisionPositions::Rotary;
  VectorRef position_grid;  // LearnedGridAndRotary: [num_position_embeddings, hidden]
  VisionNorm norm = VisionNorm::Rms;
  float eps = 1e-6f;
  VisionMlp mlp = VisionMlp::SwiGlu;
  bool windows = false;  // tokens run in window order (merged units grouped by window), restored after the merger
  std::vector<VisionBlockProgram> blocks;
  VisionMergerProgram merger;
};

// Pieces both tower families build the same way: `prefix` + weight (and bias for LayerNorm); `prefix` + weight as
// a [rows, cols] matrix and `prefix` + bias.
VisionNormRef vision_norm(const std::string& prefix, int size, VisionNorm kind);
MatrixRef vision_matrix(const std::string& prefix, int rows, int cols);
VectorRef vision_bias(const std::string& prefix, int size);
// `prefix` + attn.qkv / attn.proj of a block.
void set_vision_attention(VisionBlockProgram& block, const std::string& prefix, int hidden);

// The families (models/vision_program_<family>.cpp), with tensors under `prefix`.
VisionProgram qwen2_5_vl_vision_program(const vision::VisionTowerConfig& config, const std::string& prefix);
VisionProgram qwen3_5_vision_program(const vision::VisionTowerConfig& config, const std::string& prefix);

// The program of config.kind, tensors under whichever of "visual." and "model.visual." the checkpoint uses.
VisionProgram vision_program(const vision::VisionTowerConfig& config, const Checkpoint& checkpoint);

}  // namespace fs

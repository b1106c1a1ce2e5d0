#pragma once
// The vision_config of a Qwen2.5-VL or Qwen3.5 checkpoint.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fs::vision {

// Which tower the vision_config describes: Qwen2.5-VL (RMSNorm, SwiGLU, windows) or Qwen3.5 (learned position grid,
// LayerNorm, GELU, full attention per image).
enum class VisionTowerKind { Qwen2_5_VL, Qwen3_5 };

struct VisionTowerConfig {
  VisionTowerKind kind = VisionTowerKind::Qwen2_5_VL;
  int depth = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_heads = 0;
  int out_hidden_size = 0;
  int in_channels = 3;
  int patch_size = 14;
  int temporal_patch_size = 2;
  int spatial_merge_size = 2;
  int window_size = 112;
  std::vector<int> fullatt_block_indexes;
  double rope_theta = 10000.0;
  float rms_norm_eps = 1e-6f;
  int num_position_embeddings = 0;  // Qwen3.5: the learned position grid, a square
  bool tanh_gelu = false;           // Qwen3.5 block MLP: gelu_pytorch_tanh (else exact gelu)

  int head_dim() const { return hidden_size / num_heads; }
  int patch_dim() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  int merge_unit() const { return spatial_merge_size * spatial_merge_size; }
  // Side of an attention window in merged units (window_size / merge / patch).
  int window_units() const { return window_size / spatial_merge_size / patch_size; }
  bool full_attention(int block) const;
  // Qwen3.5: side of the learned position grid.
  int position_grid_side() const;
  // Matmuls of a block's MLP: gate, up, down (SwiGLU) or fc1, fc2 (GELU).
  int mlp_matmuls() const { return kind == VisionTowerKind::Qwen3_5 ? 2 : 3; }

  // Throws fs::Error naming `source` and the field at fault.
  static VisionTowerConfig from_json(const nlohmann::json& vision_config, const std::string& source);
};

}  // namespace fs::vision

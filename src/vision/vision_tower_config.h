#pragma once
// The vision_config of a Qwen2.5-VL checkpoint.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fs::vision {

struct VisionTowerConfig {
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

  int head_dim() const { return hidden_size / num_heads; }
  int patch_dim() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  int merge_unit() const { return spatial_merge_size * spatial_merge_size; }
  // Side of an attention window in merged units (window_size / merge / patch).
  int window_units() const { return window_size / spatial_merge_size / patch_size; }
  bool full_attention(int block) const;

  // Throws fs::Error naming `source` and the field at fault.
  static VisionTowerConfig from_json(const nlohmann::json& vision_config, const std::string& source);
};

}  // namespace fs::vision

#include "models/vision_tower_config.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace fs::vision {

namespace {

bool is_qwen3_5_tower(const nlohmann::json& j) {
  return j.value("model_type", "") == "qwen3_5_vision" || j.contains("num_position_embeddings");
}

// The fields only the Qwen3.5 tower has; every block attends over its whole image.
void read_qwen3_5_fields(const nlohmann::json& j, const std::string& source, VisionTowerConfig& c) {
  c.kind = VisionTowerKind::Qwen3_5;
  c.num_position_embeddings = j.at("num_position_embeddings").get<int>();
  const std::string act = j.value("hidden_act", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh" && act != "gelu")
    throw Error(source + ": vision hidden_act " + act + " is not supported (gelu_pytorch_tanh or gelu)");
  c.tanh_gelu = act == "gelu_pytorch_tanh";
  if (j.contains("rope_parameters")) {
    const std::string type = j["rope_parameters"].value("rope_type", "axial");
    if (type != "axial") throw Error(source + ": vision rope_type " + type + " is not supported (axial only)");
  }
  c.fullatt_block_indexes.clear();
  for (int b = 0; b < c.depth; ++b) c.fullatt_block_indexes.push_back(b);
  const int side = c.position_grid_side();
  if (side <= 1 || side * side != c.num_position_embeddings)
    throw Error(source + ": vision_config.num_position_embeddings " + std::to_string(c.num_position_embeddings) +
                " is not a square grid");
}

}  // namespace

bool VisionTowerConfig::full_attention(int block) const {
  return std::find(fullatt_block_indexes.begin(), fullatt_block_indexes.end(), block) != fullatt_block_indexes.end();
}

int VisionTowerConfig::position_grid_side() const {
  return int(std::lround(std::sqrt(double(std::max(num_position_embeddings, 0)))));
}

VisionTowerConfig VisionTowerConfig::from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw Error(source + ": the model has no vision_config (no vision tower)");
  VisionTowerConfig c;
  try {
    c.depth = j.at("depth").get<int>();
    c.hidden_size = j.at("hidden_size").get<int>();
    c.intermediate_size = j.at("intermediate_size").get<int>();
    c.num_heads = j.at("num_heads").get<int>();
    c.out_hidden_size = j.at("out_hidden_size").get<int>();
    c.in_channels = j.value("in_channels", j.value("in_chans", 3));
    c.patch_size = j.value("patch_size", j.value("spatial_patch_size", 14));
    c.temporal_patch_size = j.value("temporal_patch_size", 2);
    c.spatial_merge_size = j.value("spatial_merge_size", 2);
    c.window_size = j.value("window_size", 112);
    c.fullatt_block_indexes = j.value("fullatt_block_indexes", std::vector<int>{});
    if (j.contains("rope_parameters") && j["rope_parameters"].contains("rope_theta"))
      c.rope_theta = j["rope_parameters"]["rope_theta"].get<double>();
    if (is_qwen3_5_tower(j)) {
      read_qwen3_5_fields(j, source, c);
    } else {
      std::string act = j.value("hidden_act", "silu");
      if (act != "silu") throw Error(source + ": vision hidden_act " + act + " is not supported (silu only)");
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": vision_config: " + e.what());
  }
  if (c.depth <= 0 || c.hidden_size <= 0 || c.num_heads <= 0 || c.hidden_size % c.num_heads ||
      c.head_dim() % 4 || c.intermediate_size <= 0 || c.out_hidden_size <= 0 || c.patch_size <= 0 ||
      c.spatial_merge_size <= 0 || c.temporal_patch_size <= 0 ||
      (c.kind == VisionTowerKind::Qwen2_5_VL && c.window_units() <= 0))
    throw Error(source + ": vision_config has inconsistent sizes");
  return c;
}

}  // namespace fs::vision

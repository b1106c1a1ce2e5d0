#include "vision/vision_tower_config.h"

#include <algorithm>

#include "core/error.h"

namespace fs::vision {

bool VisionTowerConfig::full_attention(int block) const {
  return std::find(fullatt_block_indexes.begin(), fullatt_block_indexes.end(), block) != fullatt_block_indexes.end();
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
    std::string act = j.value("hidden_act", "silu");
    if (act != "silu") throw Error(source + ": vision hidden_act " + act + " is not supported (silu only)");
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": vision_config: " + e.what());
  }
  if (c.depth <= 0 || c.hidden_size <= 0 || c.num_heads <= 0 || c.hidden_size % c.num_heads ||
      c.head_dim() % 4 || c.intermediate_size <= 0 || c.out_hidden_size <= 0 || c.patch_size <= 0 ||
      c.spatial_merge_size <= 0 || c.temporal_patch_size <= 0 || c.window_units() <= 0)
    throw Error(source + ": vision_config has inconsistent sizes");
  return c;
}

}  // namespace fs::vision

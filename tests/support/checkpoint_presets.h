#pragma once
// make-checkpoint presets in tests: the shapes it writes for a config, and a shrunk qwen3.5-27b.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/files.h"
#include "models/checkpoint_maker.h"

namespace fs::test {

// Name → shape of every tensor make_checkpoint writes for `config`.
inline std::map<std::string, std::vector<int64_t>> spec_shapes(const json& config) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& s : checkpoint_tensor_specs(config)) out[s.name] = s.shape;
  return out;
}

// qwen3.5-27b shrunk to a 64-wide text model (4 heads of 32, 2 KV heads, 2 DeltaNet key heads of 16 and 4 value
// heads) and a 32-wide tower of 2 heads.
inline json shrunk_qwen3_5(int layers, int linear_value_dim, int vision_depth) {
  json c = preset_config("qwen3.5-27b");
  ConfigOverrides o;
  o.layers = layers;
  o.hidden = 64;
  o.heads = 4;
  o.kv_heads = 2;
  o.head_dim = 32;
  o.intermediate = 96;
  o.linear_key_heads = 2;
  o.linear_value_heads = 4;
  o.linear_key_dim = 16;
  o.linear_value_dim = linear_value_dim;
  o.vision_depth = vision_depth;
  o.vision_hidden = 32;
  o.vision_heads = 2;
  o.vision_intermediate = 48;
  apply_overrides(c, o);
  return c;
}

}  // namespace fs::test

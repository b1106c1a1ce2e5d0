#include "synthetic_preset.h"

#include <memory>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "models/checkpoint_maker.h"

namespace fs {

Synthetic synthetic_preset(const std::string& name, int layers) {
  nlohmann::json preset = preset_config(name);
  ConfigOverrides o;
  o.layers = layers;
  apply_overrides(preset, o);
  preset.erase("vision_config");
  auto spreads = std::make_shared<std::unordered_map<std::string, std::pair<float, float>>>();
  for (const auto& t : checkpoint_tensor_specs(preset)) (*spreads)[t.name] = {t.scale, t.offset};
  auto spread = [spreads, name](const std::string& tensor) {
    auto it = spreads->find(tensor);
    if (it == spreads->end()) throw Error("preset " + name + " has no tensor " + tensor);
    return it->second;
  };
  return {parse_model_config(preset, "preset " + name), spread};
}

}  // namespace fs

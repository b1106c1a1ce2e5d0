#pragma once
// Writes random-weight checkpoints of real model shapes (config.json + safetensors, and preprocessor_config.json
// for vision-language models), so benchmarks and tests need no download.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"

namespace fs {

struct MakeCheckpointOptions {
  DType dtype = DType::BF16;
  int shards = 1;                      // >1 writes model-0000i-of-0000n.safetensors + index
  uint64_t seed = 1;
  std::filesystem::path tokenizer_from;  // copies tokenizer.json/tokenizer_config.json/chat template from here
};

// config.json of a named preset (llama-3-8b, llama-3-70b, llama-3.2-1b, qwen3-8b, qwen2.5-7b, qwen2.5-vl-7b,
// qwen3.5-27b, qwen3.5-2b); throws on an unknown name.
nlohmann::json preset_config(const std::string& like);
std::vector<std::string> preset_names();

// Smaller versions of a config for tests and quick runs; 0 keeps the config's value. Sizes apply to the text
// model (text_config in nested layouts). Head counts must divide the hidden sizes (unless the head size is the
// config's own, as in Qwen3.5); M-RoPE sections are rescaled in proportion to the new rotary size; Qwen3.5's
// layer_types follow a new layer count (every full_attention_interval-th layer attends); full-attention vision
// blocks beyond the new depth are dropped; the tower's output size follows the text hidden size.
struct ConfigOverrides {
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, intermediate = 0, vocab = 0, head_dim = 0;
  int linear_key_heads = 0, linear_value_heads = 0, linear_key_dim = 0, linear_value_dim = 0;  // Gated DeltaNet
  int vision_depth = 0, vision_hidden = 0, vision_heads = 0, vision_intermediate = 0;
};
// Throws fs::Error when the result is inconsistent (a head count not dividing, a special token id beyond vocab).
void apply_overrides(nlohmann::json& config, const ConfigOverrides& o);

// Name and shape of every tensor make_checkpoint writes for `config`, in file order.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  float scale = 0.02f, offset = 0.0f;  // random values of this spread around this centre (norms sit near 1)
};
// Llama-family, Qwen2.5-VL and Qwen3.5 (text, and the tower when the config has a vision_config) configs.
std::vector<TensorSpec> checkpoint_tensor_specs(const nlohmann::json& config);

// preprocessor_config.json of a vision-language config (patch, merge and temporal sizes from its vision_config).
nlohmann::json preprocessor_config_for(const nlohmann::json& config);

// Writes a random checkpoint for a config.json object checkpoint_tensor_specs knows into `out`.
void make_checkpoint(const nlohmann::json& config, const std::filesystem::path& out, const MakeCheckpointOptions& o);

}  // namespace fs

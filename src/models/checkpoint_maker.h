#pragma once
// Writes random-weight checkpoints of real model shapes (config.json + safetensors), so benchmarks and tests
// need no download.
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

// config.json of a named preset (llama-3-8b, llama-3.2-1b, qwen3-8b, qwen2.5-7b); throws on an unknown name.
nlohmann::json preset_config(const std::string& like);
std::vector<std::string> preset_names();
// Writes a random checkpoint for a Llama-family config.json object into `out`.
void make_checkpoint(const nlohmann::json& config, const std::filesystem::path& out, const MakeCheckpointOptions& o);

}  // namespace fs

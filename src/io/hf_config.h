#pragma once
// config.json and generation_config.json of a Hugging Face checkpoint, in the classic and the newer layouts.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fs {

struct RopeConfig {
  double theta = 10000.0;
  std::string type = "default";  // default | llama3 | mrope
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_positions = 8192;
  std::vector<int> mrope_section;  // M-RoPE t/h/w split of the rotary half
};

struct ModelConfig {
  std::string architecture;
  std::string model_type;
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int max_positions = 0;
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (Qwen2 always has them)
  bool qk_norm = false;         // Qwen3's per-head RMSNorm on q and k
  std::string hidden_act = "silu";
  std::string torch_dtype = "bfloat16";
  std::vector<int32_t> eos_ids;
  std::optional<int32_t> bos_id;
  int32_t image_token_id = -1;  // the image-pad token of vision-language models
  nlohmann::json vision;  // vision_config, null when absent
  nlohmann::json fields;  // every field (text_config's on top), for the options a family reads itself
};

// Parses a config.json object (the text part of nested `text_config` layouts is used). Throws fs::Error naming
// `source` and the field at fault.
ModelConfig parse_model_config(const nlohmann::json& j, const std::string& source);
ModelConfig load_model_config(const std::filesystem::path& dir);

struct GenerationConfig {
  std::vector<int32_t> eos_ids;
  std::optional<int32_t> bos_id;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  bool do_sample = false;
};

// generation_config.json when present (eos ids fall back to config.json's).
GenerationConfig load_generation_config(const std::filesystem::path& dir, const ModelConfig& config);

}  // namespace fs

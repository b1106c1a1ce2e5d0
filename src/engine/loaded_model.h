#pragma once
// Everything loaded from one checkpoint folder: config, tokenizer, chat template, weights.
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "io/hf_config.h"
#include "models/model.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace fs {

struct LoadedModel {
  std::filesystem::path dir;
  std::string name;  // the folder's name
  ModelConfig config;
  GenerationConfig generation;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;
  std::unique_ptr<Model> model;
};

// Called with (done, total) units while weights load.
using LoadProgress = std::function<void(size_t done, size_t total)>;

// Loads DIR (an empty path → the built-in fortune-demo). Throws fs::Error naming the file at fault.
// `device` is "auto", "cpu" or "cuda".
std::unique_ptr<LoadedModel> load_model(const std::filesystem::path& dir, const LoadProgress& progress = {},
                                        const std::string& device = "auto");

}  // namespace fs

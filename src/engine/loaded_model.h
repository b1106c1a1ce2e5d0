#pragma once
// Everything loaded from one checkpoint folder: config, tokenizer, chat template, weights, and the vision tower
// when image input is on.
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

class Checkpoint;
namespace vision {
class VisionEncoder;
struct ImageProcessorConfig;
}  // namespace vision

struct LoadedModel {
  std::filesystem::path dir;
  std::string name;  // the folder's name
  ModelConfig config;
  GenerationConfig generation;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;
  std::shared_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Model> model;
  // Set when image input is turned on and the checkpoint has a vision tower (server/image_input.h loads them);
  // the encoder runs on the text model's device.
  std::shared_ptr<vision::VisionEncoder> vision_encoder;
  std::shared_ptr<const vision::ImageProcessorConfig> image_processor;
};

// Called with (done, total) units while weights load.
using LoadProgress = std::function<void(size_t done, size_t total)>;

// Loads DIR (an empty path → the built-in fortune-demo). Throws fs::Error naming the file at fault.
// `device` is "auto", "cpu" or "cuda"; `tensor_parallel` > 1 splits the model over that many GPUs.
std::unique_ptr<LoadedModel> load_model(const std::filesystem::path& dir, const LoadProgress& progress = {},
                                        const std::string& device = "auto", int tensor_parallel = 1);

}  // namespace fs

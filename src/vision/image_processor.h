#pragma once
// Qwen2-VL / Qwen2.5-VL / Qwen3.5 image preprocessing as transformers' Qwen2VLImageProcessor: smart resize to
// multiples of patch·merge, bicubic resize (PIL's, as the PIL backend, or torchvision's uint8 kernel, as the
// torchvision backend transformers 5 uses by default), rescale and normalize as that backend does, temporal
// duplication and patches of [channels · temporal · patch · patch] in the processor's merge-block order.
#include <array>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/vision_patches.h"
#include "vision/image.h"

namespace fs::vision {

// Which of transformers' image-processor backends the pixels must equal.
enum class ImageBackend { Pil, Torchvision };

struct ImageProcessorConfig {
  ImageBackend backend = ImageBackend::Pil;
  bool backend_named = false;  // preprocessor_config.json names the backend (image_processor_type ...Fast / ...Pil)
  int64_t min_pixels = 56 * 56;
  int64_t max_pixels = 28 * 28 * 1280;
  int patch_size = 14;
  int temporal_patch_size = 2;
  int merge_size = 2;
  std::array<float, 3> mean{0.48145466f, 0.4578275f, 0.40821073f};
  std::array<float, 3> std{0.26862954f, 0.26130258f, 0.27577711f};
  double rescale_factor = 1.0 / 255.0;
  bool do_resize = true, do_rescale = true, do_normalize = true;

  // Reads preprocessor_config.json fields (min/max_pixels or size.shortest/longest_edge, the backend from an
  // image_processor_type ending in Fast or Pil); refuses resamplers other than bicubic by name.
  static ImageProcessorConfig from_json(const nlohmann::json& j, const std::string& source);
  static ImageProcessorConfig load(const std::filesystem::path& model_dir);
  // As load(), with `family_default` as the backend when the file does not name one.
  static ImageProcessorConfig load(const std::filesystem::path& model_dir, ImageBackend family_default);
  int patch_dim() const { return 3 * temporal_patch_size * patch_size * patch_size; }
};

// The backend a model family's references use when preprocessor_config.json does not name one: Qwen3.5 checkpoints
// come from transformers 5, whose Qwen2VLImageProcessor is the torchvision one; Qwen2.5-VL keeps PIL's.
ImageBackend family_image_backend(const std::string& architecture);

struct ResizedSize {
  int height = 0, width = 0;
};

// The size transformers' smart_resize picks: both sides multiples of `factor`, pixel count within the limits,
// aspect ratio kept as well as rounding allows; ratios above 200 are refused.
ResizedSize smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels);

// Resized size of an image of this size under the config (no pixels touched), for admission checks.
ImageGrid grid_for_size(int width, int height, const ImageProcessorConfig& config);

PixelPatches preprocess_image(const RgbImage& image, const ImageProcessorConfig& config);

}  // namespace fs::vision

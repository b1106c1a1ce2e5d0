#pragma once
// Qwen2-VL / Qwen2.5-VL image preprocessing as transformers' Qwen2VLImageProcessor (the PIL-based "slow" one):
// smart resize to multiples of patch·merge, PIL bicubic, rescale, normalize, temporal duplication and patches of
// [channels · temporal · patch · patch] in the processor's merge-block order.
#include <array>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "vision/image.h"

namespace fs::vision {

struct ImageProcessorConfig {
  int64_t min_pixels = 56 * 56;
  int64_t max_pixels = 28 * 28 * 1280;
  int patch_size = 14;
  int temporal_patch_size = 2;
  int merge_size = 2;
  std::array<float, 3> mean{0.48145466f, 0.4578275f, 0.40821073f};
  std::array<float, 3> std{0.26862954f, 0.26130258f, 0.27577711f};
  double rescale_factor = 1.0 / 255.0;
  bool do_resize = true, do_rescale = true, do_normalize = true;

  // Reads preprocessor_config.json fields (min/max_pixels or size.shortest/longest_edge); refuses resamplers
  // other than bicubic by name.
  static ImageProcessorConfig from_json(const nlohmann::json& j, const std::string& source);
  static ImageProcessorConfig load(const std::filesystem::path& model_dir);
  int patch_dim() const { return 3 * temporal_patch_size * patch_size * patch_size; }
};

struct ImageGrid {
  int t = 1, h = 0, w = 0;  // in patches
  int64_t patches() const { return int64_t(t) * h * w; }
};

struct PixelPatches {
  ImageGrid grid;
  int patch_dim = 0;
  std::vector<float> values;  // [grid.patches(), patch_dim]
};

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

#include "vision/image_processor.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/files.h"
#include "vision/parallel_rows.h"
#include "vision/pil_resize.h"
#include "vision/torch_resize.h"

namespace fs::vision {

ImageProcessorConfig ImageProcessorConfig::from_json(const nlohmann::json& j, const std::string& source) {
  ImageProcessorConfig c;
  try {
    if (j.contains("min_pixels") && !j["min_pixels"].is_null()) c.min_pixels = j["min_pixels"].get<int64_t>();
    if (j.contains("max_pixels") && !j["max_pixels"].is_null()) c.max_pixels = j["max_pixels"].get<int64_t>();
    if (j.contains("size") && j["size"].is_object()) {
      const auto& s = j["size"];
      if (s.contains("shortest_edge")) c.min_pixels = s["shortest_edge"].get<int64_t>();
      if (s.contains("longest_edge")) c.max_pixels = s["longest_edge"].get<int64_t>();
    }
    c.patch_size = j.value("patch_size", c.patch_size);
    c.temporal_patch_size = j.value("temporal_patch_size", c.temporal_patch_size);
    c.merge_size = j.value("merge_size", c.merge_size);
    if (j.contains("image_mean")) c.mean = j["image_mean"].get<std::array<float, 3>>();
    if (j.contains("image_std")) c.std = j["image_std"].get<std::array<float, 3>>();
    c.rescale_factor = j.value("rescale_factor", c.rescale_factor);
    c.do_resize = j.value("do_resize", true);
    c.do_rescale = j.value("do_rescale", true);
    c.do_normalize = j.value("do_normalize", true);
    const std::string type = j.value("image_processor_type", "");
    auto ends_with = [&](const std::string& suffix) {
      return type.size() >= suffix.size() && type.compare(type.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends_with("Fast")) c.backend = ImageBackend::Torchvision, c.backend_named = true;
    if (ends_with("Pil")) c.backend = ImageBackend::Pil, c.backend_named = true;
    int resample = j.value("resample", 3);
    if (resample != 3)
      throw Error(source + ": resample " + std::to_string(resample) + " is not supported (only 3, bicubic)");
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": " + e.what());
  }
  if (c.patch_size <= 0 || c.temporal_patch_size <= 0 || c.merge_size <= 0 || c.min_pixels < 0 ||
      c.max_pixels < c.min_pixels)
    throw Error(source + ": invalid patch, merge or pixel-limit settings");
  for (float s : c.std)
    if (!(s > 0)) throw Error(source + ": image_std must be positive");
  return c;
}

ImageProcessorConfig ImageProcessorConfig::load(const std::filesystem::path& model_dir) {
  auto path = model_dir / "preprocessor_config.json";
  return from_json(read_json_file(path), path.string());
}

ImageProcessorConfig ImageProcessorConfig::load(const std::filesystem::path& model_dir, ImageBackend family_default) {
  ImageProcessorConfig c = load(model_dir);
  if (!c.backend_named) c.backend = family_default;
  return c;
}

ImageBackend family_image_backend(const std::string& architecture) {
  return architecture == "Qwen3_5ForConditionalGeneration" ? ImageBackend::Torchvision : ImageBackend::Pil;
}

ResizedSize smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels) {
  if (height <= 0 || width <= 0) throw Error("image has no pixels");
  if (double(std::max(height, width)) / std::min(height, width) > 200)
    throw Error("image aspect ratio " + std::to_string(width) + "x" + std::to_string(height) +
                " is more extreme than 200:1");
  // Python's round(): halves go to the even neighbour, as nearbyint does in the default rounding mode.
  int64_t h_bar = int64_t(std::nearbyint(double(height) / factor)) * factor;
  int64_t w_bar = int64_t(std::nearbyint(double(width) / factor)) * factor;
  if (h_bar * w_bar > max_pixels) {
    double beta = std::sqrt(double(height) * width / double(max_pixels));
    h_bar = std::max<int64_t>(factor, int64_t(std::floor(height / beta / factor)) * factor);
    w_bar = std::max<int64_t>(factor, int64_t(std::floor(width / beta / factor)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    double beta = std::sqrt(double(min_pixels) / (double(height) * width));
    h_bar = int64_t(std::ceil(height * beta / factor)) * factor;
    w_bar = int64_t(std::ceil(width * beta / factor)) * factor;
  }
  return {int(h_bar), int(w_bar)};
}

ImageGrid grid_for_size(int width, int height, const ImageProcessorConfig& c) {
  const int factor = c.patch_size * c.merge_size;
  ResizedSize s = c.do_resize ? smart_resize(height, width, factor, c.min_pixels, c.max_pixels)
                              : ResizedSize{height, width};
  if (s.height % factor || s.width % factor)
    throw Error("image size " + std::to_string(s.width) + "x" + std::to_string(s.height) +
                " is not a multiple of " + std::to_string(factor));
  return {1, s.height / c.patch_size, s.width / c.patch_size};
}

namespace {

// The PIL backend: float64 rescale stored as float32, then float32 (x − mean) / std.
float pil_value(int v, int ch, const ImageProcessorConfig& c) {
  const float x = c.do_rescale ? float(double(v) * c.rescale_factor) : float(v);
  return c.do_normalize ? (x - c.mean[size_t(ch)]) / c.std[size_t(ch)] : x;
}

// The torchvision backend: rescale fused into normalize (mean and std × float32(1 / rescale_factor)), float32.
float torchvision_value(int v, int ch, const ImageProcessorConfig& c) {
  if (c.do_normalize) {
    const float k = c.do_rescale ? float(1.0 / c.rescale_factor) : 1.0f;
    return (float(v) - c.mean[size_t(ch)] * k) / (c.std[size_t(ch)] * k);
  }
  return c.do_rescale ? float(v) * float(c.rescale_factor) : float(v);
}

}  // namespace

PixelPatches preprocess_image(const RgbImage& image, const ImageProcessorConfig& c) {
  const ImageGrid grid = grid_for_size(image.width, image.height, c);
  const int ps = c.patch_size, m = c.merge_size, tps = c.temporal_patch_size;
  const bool torchvision = c.backend == ImageBackend::Torchvision;
  RgbImage img = torchvision ? resize_bicubic_torch(image, grid.w * ps, grid.h * ps)
                             : resize_bicubic_pil(image, grid.w * ps, grid.h * ps);
  std::array<std::array<float, 256>, 3> lut;
  for (int ch = 0; ch < 3; ++ch)
    for (int v = 0; v < 256; ++v)
      lut[size_t(ch)][size_t(v)] = torchvision ? torchvision_value(v, ch, c) : pil_value(v, ch, c);
  PixelPatches out;
  out.grid = grid;
  out.patch_dim = c.patch_dim();
  out.values.resize(size_t(grid.patches()) * size_t(out.patch_dim));
  const int bh_n = grid.h / m, bw_n = grid.w / m;
  parallel_rows(bh_n, 1, [&](int bh0, int bh1) {
    size_t row = size_t(bh0) * size_t(bw_n) * size_t(m) * size_t(m);
    for (int bh = bh0; bh < bh1; ++bh)
      for (int bw = 0; bw < bw_n; ++bw)
        for (int mh = 0; mh < m; ++mh)
          for (int mw = 0; mw < m; ++mw, ++row) {
            const int py0 = (bh * m + mh) * ps, px0 = (bw * m + mw) * ps;
            float* dst = &out.values[row * size_t(out.patch_dim)];
            for (int ch = 0; ch < 3; ++ch)
              for (int tp = 0; tp < tps; ++tp)  // the still image fills every temporal slot
                for (int y = 0; y < ps; ++y)
                  for (int x = 0; x < ps; ++x) *dst++ = lut[size_t(ch)][img.at(px0 + x, py0 + y, ch)];
          }
  });
  return out;
}

}  // namespace fs::vision

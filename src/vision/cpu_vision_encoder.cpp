// The CPU vision towers (Qwen2.5-VL, Qwen3.5) behind the VisionEncoder interface.
#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "vision/qwen2_5_vl_tower.h"
#include "vision/qwen3_5_vision_tower.h"
#include "vision/vision_encoder.h"

namespace fs::vision {

namespace {

template <class Tower>
class CpuVisionEncoder final : public VisionEncoder {
 public:
  CpuVisionEncoder(const VisionTowerConfig& config, std::shared_ptr<Checkpoint> checkpoint)
      : tower_(config, std::move(checkpoint)) {}

  const VisionTowerConfig& config() const override { return tower_.config(); }

  std::vector<float> encode(const PixelPatches& patches) override { return run(patches, nullptr); }

  std::vector<float> encode_cancellable(const PixelPatches& patches, const CancelFlag& cancel) override {
    return run(patches, &cancel);
  }

  size_t weight_bytes() const override { return tower_.weight_bytes(); }
  const char* device_name() const override { return "cpu"; }

  std::vector<std::string> budget_lines() const override {
    return {"vision tower (cpu): " + std::to_string(tower_.weight_bytes() >> 20) + " MiB of weights in host memory"};
  }

  VisionEncoderStats stats() const override {
    VisionEncoderStats s;
    s.host_weight_bytes = tower_.weight_bytes();
    s.images = images_;
    s.last_encode_ms = last_ms_;
    return s;
  }

 private:
  std::vector<float> run(const PixelPatches& patches, const CancelFlag* cancel) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<float> out = tower_.encode(patches, cancel);
    last_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ++images_;
    return out;
  }

  Tower tower_;
  uint64_t images_ = 0;
  double last_ms_ = 0;
};

}  // namespace

std::unique_ptr<VisionEncoder> create_cpu_vision_encoder(const VisionTowerConfig& config,
                                                         std::shared_ptr<Checkpoint> checkpoint,
                                                         const VisionEncoderOptions& options) {
  if (options.weights_on_host)
    throw Error("--vision-host keeps a GPU tower's weights in pinned host memory; the vision tower runs on the CPU");
  if (config.kind == VisionTowerKind::Qwen3_5)
    return std::make_unique<CpuVisionEncoder<Qwen35VisionTower>>(config, std::move(checkpoint));
  return std::make_unique<CpuVisionEncoder<Qwen25VisionTower>>(config, std::move(checkpoint));
}

int64_t max_image_patches(const ImageProcessorConfig& p) {
  const int64_t pixels = std::max(p.max_pixels, p.min_pixels);
  const int64_t patch = int64_t(p.patch_size) * p.patch_size;
  return std::max<int64_t>(pixels / patch, 1);
}

}  // namespace fs::vision

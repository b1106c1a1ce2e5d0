#pragma once
// A device's vision encoder run through a TowerScheduler (off the engine's round loop, cancellable), with the
// largest image it admits set from its speed measured at start.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vision/image_budget.h"
#include "vision/tower_scheduler.h"
#include "vision/vision_encoder.h"

namespace fs::vision {

struct ImageTimeBudget {
  double max_seconds = 5;      // --max-image-seconds: longest encode admitted (0: no time bound)
  int64_t cap_patches = 0;     // the admitted size without a time bound (--max-image-pixels, the processor's)
  double calibration_seconds = 0.25;  // calibration stops at the first image that takes this long
  int threads = 1;             // the scheduler's pool
  int nice = 19;               // the scheduler's priority
};

class ScheduledVisionEncoder final : public VisionEncoder {
 public:
  // Measures the device encoder's speed on the scheduler's thread (when max_seconds > 0).
  ScheduledVisionEncoder(std::shared_ptr<VisionEncoder> device, const ImageTimeBudget& budget);

  // Runs image work (which calls device().encode_cancellable) on the scheduler; see TowerScheduler::run.
  void run(const TowerScheduler::Job& job, const std::function<bool()>& should_stop);
  VisionEncoder& device() { return *device_; }

  // Largest image admitted, in patches, and why (for a 400 and the start-up line).
  int64_t admitted_patches() const { return admitted_; }
  std::string admitted_reason() const;
  const TowerSpeed& speed() const { return speed_; }

  const VisionTowerConfig& config() const override { return device_->config(); }
  std::vector<float> encode(const PixelPatches& patches) override;
  std::vector<float> encode_cancellable(const PixelPatches& patches, const CancelFlag& cancel) override;
  size_t weight_bytes() const override { return device_->weight_bytes(); }
  const char* device_name() const override { return device_->device_name(); }
  std::vector<std::string> budget_lines() const override;
  VisionEncoderStats stats() const override;

 private:
  std::shared_ptr<VisionEncoder> device_;
  ImageTimeBudget budget_;
  TowerScheduler scheduler_;
  TowerSpeed speed_;
  int64_t admitted_ = 0;
};

}  // namespace fs::vision

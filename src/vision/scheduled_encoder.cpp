#include "vision/scheduled_encoder.h"

#include <cmath>
#include <cstdio>

namespace fs::vision {

ScheduledVisionEncoder::ScheduledVisionEncoder(std::shared_ptr<VisionEncoder> device, const ImageTimeBudget& budget)
    : device_(std::move(device)), budget_(budget), scheduler_(budget.threads, budget.nice) {
  admitted_ = budget_.cap_patches;
  if (budget_.max_seconds <= 0) return;
  scheduler_.run([&](const CancelFlag&) { speed_ = measure_tower_speed(*device_, budget_.calibration_seconds,
                                                                        budget_.cap_patches); },
                 {});
  admitted_ = patches_within(device_->config(), speed_, budget_.max_seconds, budget_.cap_patches);
}

void ScheduledVisionEncoder::run(const TowerScheduler::Job& job, const std::function<bool()>& should_stop) {
  scheduler_.run(job, should_stop);
}

std::vector<float> ScheduledVisionEncoder::encode(const PixelPatches& patches) {
  std::vector<float> out;
  scheduler_.run([&](const CancelFlag& cancel) { out = device_->encode_cancellable(patches, cancel); }, {});
  return out;
}

std::vector<float> ScheduledVisionEncoder::encode_cancellable(const PixelPatches& patches, const CancelFlag& cancel) {
  std::vector<float> out;
  scheduler_.run([&](const CancelFlag& stop) { out = device_->encode_cancellable(patches, stop); },
                 [&] { return cancel.load(); });
  return out;
}

std::string ScheduledVisionEncoder::admitted_reason() const {
  const int64_t pixels = admitted_ * device_->config().patch_size * device_->config().patch_size;
  char text[320];
  if (budget_.max_seconds > 0 && admitted_ < budget_.cap_patches)
    std::snprintf(text, sizeof text,
                  "at most %lld pixels per image after resizing: what the %s vision tower encodes in "
                  "--max-image-seconds %g at its speed measured at start",
                  (long long)pixels, device_->device_name(), budget_.max_seconds);
  else
    std::snprintf(text, sizeof text, "at most %lld pixels per image after resizing (--max-image-pixels and the "
                  "image processor's max_pixels)", (long long)pixels);
  return text;
}

std::vector<std::string> ScheduledVisionEncoder::budget_lines() const {
  std::vector<std::string> lines = device_->budget_lines();
  std::string line = "image budget: " + admitted_reason();
  if (budget_.max_seconds > 0) {
    char measured[200];
    const int side = int(std::lround(std::sqrt(double(speed_.patches))));
    std::snprintf(measured, sizeof measured, "; measured %.2f GFLOP/s (a %d×%d-patch synthetic image took %.0f ms)",
                  speed_.flops_per_second / 1e9, side, side, speed_.seconds * 1e3);
    line += measured;
  }
  lines.push_back(line);
  return lines;
}

VisionEncoderStats ScheduledVisionEncoder::stats() const {
  VisionEncoderStats s = device_->stats();
  s.cancelled = scheduler_.cancelled();
  return s;
}

}  // namespace fs::vision

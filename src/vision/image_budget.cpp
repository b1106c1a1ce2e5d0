#include "vision/image_budget.h"

#include <algorithm>
#include <chrono>

#include "vision/image_processor.h"
#include "vision/vision_encoder.h"

namespace fs::vision {

double tower_flops(const VisionTowerConfig& c, int64_t patches) {
  const double T = double(patches), H = c.hidden_size, F = c.intermediate_size, O = c.out_hidden_size;
  const double M = H * c.merge_unit();
  const double window_tokens = double(c.window_units()) * c.window_units() * c.merge_unit();
  double flops = 2 * T * c.patch_dim() * H;
  for (int b = 0; b < c.depth; ++b) {
    const double keys = c.full_attention(b) ? T : std::min(T, window_tokens);
    flops += 2 * T * H * (4 * H + c.mlp_matmuls() * F);  // qkv, proj, the MLP
    flops += 4 * T * keys * H;              // scores and weighted values
  }
  flops += 2 * (T / c.merge_unit()) * (M * M + M * O);
  return flops;
}

TowerSpeed measure_tower_speed(VisionEncoder& encoder, double min_seconds, int64_t max_patches) {
  const VisionTowerConfig& c = encoder.config();
  TowerSpeed speed;
  const int step = c.spatial_merge_size;
  for (int side = 2 * step;; side = std::max(side + step, (side * 7 / 5) / step * step)) {
    PixelPatches px;
    px.grid = {1, side, side};
    px.patch_dim = c.patch_dim();
    px.values.resize(size_t(px.grid.patches()) * size_t(px.patch_dim));
    for (size_t i = 0; i < px.values.size(); ++i) px.values[i] = float(int(i % 251) - 125) / 125.0f;
    auto timed = [&] {
      const auto start = std::chrono::steady_clock::now();
      encoder.encode(px);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    double seconds = timed();
    // A long encode may be the machine's other work stalling a small one: keep the fastest of three.
    for (int again = 0; again < 2 && seconds >= min_seconds; ++again) seconds = std::min(seconds, timed());
    speed.patches = px.grid.patches();
    speed.seconds = std::max(seconds, 1e-6);
    speed.flops_per_second = tower_flops(c, speed.patches) / speed.seconds;
    if (seconds >= min_seconds || 2 * speed.patches > max_patches) return speed;
  }
}

int64_t patches_within(const VisionTowerConfig& c, const TowerSpeed& speed, double seconds, int64_t cap) {
  const int64_t unit = c.merge_unit();
  const double flops = speed.flops_per_second * seconds;
  int64_t lo = 0, hi = std::max<int64_t>(cap / unit, 0);  // in merge units
  if (tower_flops(c, hi * unit) <= flops) return hi * unit;
  while (lo + 1 < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    (tower_flops(c, mid * unit) <= flops ? lo : hi) = mid;
  }
  return lo * unit;
}

}  // namespace fs::vision

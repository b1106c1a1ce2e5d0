#pragma once
// Token bookkeeping of one Qwen2.5-VL tower pass: the window reordering of merged units, the attention segments
// of windowed and full blocks, and each token's 2-D rotary angles, all in window order.
#include <vector>

#include "models/vision_patches.h"
#include "models/vision_tower_config.h"

namespace fs::vision {

struct WindowPlan {
  int tokens = 0;
  std::vector<int> window_index;    // merged unit at window-order slot i (a permutation of units)
  std::vector<int> window_bounds;   // token offsets of the attention windows, 0 .. tokens
  std::vector<int> frame_bounds;    // token offsets of the frames (full attention), 0 .. tokens
  std::vector<float> cos, sin;      // [tokens, head_dim / 2], window order
};

// The plan for one image (or video) of `grid`; grid sides must be multiples of the merge size.
WindowPlan plan_windows(const ImageGrid& grid, const VisionTowerConfig& config);

}  // namespace fs::vision

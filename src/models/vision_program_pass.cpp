#include "models/vision_program_pass.h"

#include <cmath>

#include "models/window_plan.h"

namespace fs {

VisionPass vision_pass(const VisionProgram& v, const vision::ImageGrid& g) {
  const vision::VisionTowerConfig& c = v.config;
  VisionPass p;
  if (v.windows) {
    vision::WindowPlan w = vision::plan_windows(g, c);
    p.tokens = w.tokens;
    p.window_index = std::move(w.window_index);
    p.window_bounds = std::move(w.window_bounds);
    p.frame_bounds = std::move(w.frame_bounds);
    p.cos = std::move(w.cos);
    p.sin = std::move(w.sin);
    return p;
  }
  p.tokens = int(g.patches());
  for (int t = 0; t <= g.t; ++t) p.frame_bounds.push_back(t * g.h * g.w);
  const std::vector<float> angles = vision::axial_rotary_angles(g, c.head_dim(), c.rope_theta, c.spatial_merge_size);
  p.cos.resize(angles.size());
  p.sin.resize(angles.size());
  for (size_t i = 0; i < angles.size(); ++i) {
    p.cos[i] = std::cos(angles[i]);
    p.sin[i] = std::sin(angles[i]);
  }
  if (v.positions == VisionPositions::LearnedGridAndRotary)
    p.taps = vision::position_grid_taps(g, c.position_grid_side(), c.spatial_merge_size);
  return p;
}

}  // namespace fs

#pragma once
// One image's bookkeeping for a vision tower program, the same for every backend: the order its tokens run in,
// the attention segments of windowed and full blocks, each token's 2-D rotary cos/sin and (learned position grid)
// its four taps into the grid.
#include <vector>

#include "models/vision_patches.h"
#include "models/vision_position_grid.h"
#include "models/vision_program.h"

namespace fs {

struct VisionPass {
  int tokens = 0;
  std::vector<int> window_index;   // windows: merged unit at window-order slot i; empty → processor order
  std::vector<int> window_bounds;  // windows: token offsets of the attention windows, 0 .. tokens
  std::vector<int> frame_bounds;   // token offsets of the frames (full attention), 0 .. tokens
  std::vector<float> cos, sin;     // [tokens, head_dim / 2] in the order the tokens run
  vision::PositionTaps taps;       // learned grid: [tokens, 4] each; empty otherwise
};

// The pass of an image of `grid`; grid sides must be multiples of the merge size.
VisionPass vision_pass(const VisionProgram& program, const vision::ImageGrid& grid);

}  // namespace fs

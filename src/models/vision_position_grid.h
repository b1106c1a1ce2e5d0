#pragma once
// Where each patch of an image sits for the Qwen3.5 tower, in the processor's merge-block order: its taps into the
// learned square position grid (bilinear, align_corners) and its 2-D rotary angles.
#include <cstdint>
#include <vector>

#include "models/vision_patches.h"

namespace fs::vision {

// Four taps per patch into a side×side grid (row-major ids) and their weights, [patches, 4] each, as transformers'
// get_vision_interpolation_indices_and_weights(mode="bilinear", align_corners=True); frames repeat.
struct PositionTaps {
  std::vector<int32_t> index;
  std::vector<float> weight;
};
PositionTaps position_grid_taps(const ImageGrid& grid, int side, int merge);

// Rotary angles [patches, head_dim / 2]: the first quarter of head_dim turns with the patch row, the second with
// its column, at frequencies theta^(−2i / (head_dim / 2)) (the axial rotary of the Qwen vision towers).
std::vector<float> axial_rotary_angles(const ImageGrid& grid, int head_dim, double theta, int merge);

}  // namespace fs::vision

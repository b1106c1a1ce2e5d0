#pragma once
// An image as a vision tower takes it: its grid of patches and the patches' values in the processor's order.
#include <cstdint>
#include <vector>

namespace fs::vision {

struct ImageGrid {
  int t = 1, h = 0, w = 0;  // in patches
  int64_t patches() const { return int64_t(t) * h * w; }
};

struct PixelPatches {
  ImageGrid grid;
  int patch_dim = 0;
  std::vector<float> values;  // [grid.patches(), patch_dim]
};

}  // namespace fs::vision

#include "models/vision_position_grid.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.h"

namespace fs::vision {

namespace {

// Row and column of each patch of one frame, in merge-block order (block row, block col, in-row, in-col).
template <class F>
void for_each_patch(const ImageGrid& g, int merge, F&& f) {
  if (g.t <= 0 || g.h <= 0 || g.w <= 0 || g.h % merge || g.w % merge)
    throw Error("image grid " + std::to_string(g.h) + "x" + std::to_string(g.w) +
                " is not a multiple of the merge size");
  size_t patch = 0;
  for (int t = 0; t < g.t; ++t)
    for (int bh = 0; bh < g.h / merge; ++bh)
      for (int bw = 0; bw < g.w / merge; ++bw)
        for (int mh = 0; mh < merge; ++mh)
          for (int mw = 0; mw < merge; ++mw) f(patch++, bh * merge + mh, bw * merge + mw);
}

struct AxisTaps {
  std::array<int, 2> tap;
  std::array<float, 2> weight;
};

// Position `index` of an axis of `size` mapped onto `side` grid points with the ends aligned, in float32 as torch.
AxisTaps axis_taps(int index, int size, int side) {
  const float src = float(index) * float(side - 1) / float(std::max(size - 1, 1));
  const float floor = std::floor(src);
  AxisTaps a;
  for (int o = 0; o < 2; ++o) {
    a.tap[size_t(o)] = std::clamp(int(floor) + o, 0, side - 1);
    a.weight[size_t(o)] = std::max(1.0f - std::fabs(src - floor - float(o)), 0.0f);
  }
  return a;
}

}  // namespace

PositionTaps position_grid_taps(const ImageGrid& g, int side, int merge) {
  PositionTaps p;
  p.index.resize(size_t(g.patches()) * 4);
  p.weight.resize(p.index.size());
  for_each_patch(g, merge, [&](size_t patch, int row, int col) {
    const AxisTaps h = axis_taps(row, g.h, side), w = axis_taps(col, g.w, side);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        const size_t k = patch * 4 + size_t(i * 2 + j);
        p.index[k] = h.tap[size_t(i)] * side + w.tap[size_t(j)];
        p.weight[k] = h.weight[size_t(i)] * w.weight[size_t(j)];
      }
  });
  return p;
}

std::vector<float> axial_rotary_angles(const ImageGrid& g, int head_dim, double theta, int merge) {
  const int half = head_dim / 2, quarter = half / 2;
  std::vector<float> inv_freq(static_cast<size_t>(quarter));
  for (int i = 0; i < quarter; ++i)
    inv_freq[size_t(i)] = float(1.0 / std::pow(theta, double(2 * i) / double(half)));
  std::vector<float> angles(size_t(g.patches()) * size_t(half));
  for_each_patch(g, merge, [&](size_t patch, int row, int col) {
    float* a = &angles[patch * size_t(half)];
    for (int i = 0; i < quarter; ++i) {
      a[i] = float(row) * inv_freq[size_t(i)];
      a[quarter + i] = float(col) * inv_freq[size_t(i)];
    }
  });
  return angles;
}

}  // namespace fs::vision

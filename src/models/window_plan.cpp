#include "models/window_plan.h"

#include <cmath>

#include "core/error.h"

namespace fs::vision {

namespace {

// Rotary angles of every patch in processor order: the first quarter of head_dim rotates by the patch row, the
// second by the patch column (Qwen2_5_VisionRotaryEmbedding over head_dim / 2 with theta).
std::vector<float> patch_angles(const ImageGrid& g, const VisionTowerConfig& c) {
  const int half = c.head_dim() / 2, quarter = half / 2, m = c.spatial_merge_size;
  std::vector<float> inv_freq(size_t(quarter), 0.0f);
  for (int i = 0; i < quarter; ++i)
    inv_freq[size_t(i)] = float(1.0 / std::pow(c.rope_theta, double(2 * i) / double(half)));
  std::vector<float> angles(size_t(g.patches()) * size_t(half));
  size_t row = 0;
  for (int t = 0; t < g.t; ++t)
    for (int bh = 0; bh < g.h / m; ++bh)
      for (int bw = 0; bw < g.w / m; ++bw)
        for (int mh = 0; mh < m; ++mh)
          for (int mw = 0; mw < m; ++mw, ++row) {
            float* a = &angles[row * size_t(half)];
            for (int i = 0; i < quarter; ++i) {
              a[i] = float(bh * m + mh) * inv_freq[size_t(i)];
              a[quarter + i] = float(bw * m + mw) * inv_freq[size_t(i)];
            }
          }
  return angles;
}

}  // namespace

WindowPlan plan_windows(const ImageGrid& g, const VisionTowerConfig& c) {
  const int m = c.spatial_merge_size, unit = c.merge_unit(), win = c.window_units();
  if (g.t <= 0 || g.h <= 0 || g.w <= 0 || g.h % m || g.w % m)
    throw Error("image grid " + std::to_string(g.h) + "x" + std::to_string(g.w) + " is not a multiple of the merge size");
  WindowPlan p;
  p.tokens = int(g.patches());
  const int uh = g.h / m, uw = g.w / m;
  const int nwh = (uh + win - 1) / win, nww = (uw + win - 1) / win;
  p.window_bounds.push_back(0);
  for (int t = 0; t < g.t; ++t)
    for (int wh = 0; wh < nwh; ++wh)
      for (int ww = 0; ww < nww; ++ww) {
        for (int y = wh * win; y < std::min(uh, (wh + 1) * win); ++y)
          for (int x = ww * win; x < std::min(uw, (ww + 1) * win); ++x)
            p.window_index.push_back((t * uh + y) * uw + x);
        p.window_bounds.push_back(int(p.window_index.size()) * unit);
      }
  for (int t = 0; t <= g.t; ++t) p.frame_bounds.push_back(t * g.h * g.w);
  std::vector<float> angles = patch_angles(g, c);
  const size_t half = size_t(c.head_dim() / 2);
  p.cos.resize(angles.size());
  p.sin.resize(angles.size());
  size_t row = 0;
  for (int u : p.window_index)
    for (int k = 0; k < unit; ++k, ++row) {
      const float* a = &angles[(size_t(u) * unit + size_t(k)) * half];
      for (size_t i = 0; i < half; ++i) {
        p.cos[row * half + i] = std::cos(a[i]);
        p.sin[row * half + i] = std::sin(a[i]);
      }
    }
  return p;
}

}  // namespace fs::vision

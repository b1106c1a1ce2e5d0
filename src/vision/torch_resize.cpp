#include "vision/torch_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace fs::vision {

namespace {

double keys_cubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
  return 0.0;
}

// Per output index: first source index, tap count and int16 weights (max_taps per output) at `precision` bits.
struct Int16Taps {
  int max_taps = 0;
  unsigned precision = 0;
  std::vector<int> first, count;
  std::vector<int16_t> weights;
};

Int16Taps precompute(int in_size, int out_size) {
  const double scale = double(in_size) / double(out_size);
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  Int16Taps t;
  t.max_taps = int(std::ceil(support)) * 2 + 1;
  t.first.resize(size_t(out_size));
  t.count.resize(size_t(out_size));
  std::vector<double> w(size_t(out_size) * size_t(t.max_taps), 0.0);
  double w_max = 0.0;
  for (int i = 0; i < out_size; ++i) {
    const double center = scale * (i + 0.5);
    const int64_t xmin = std::max<int64_t>(int64_t(center - support + 0.5), 0);
    const int64_t xsize =
        std::clamp<int64_t>(std::min<int64_t>(int64_t(center + support + 0.5), in_size) - xmin, 0, t.max_taps);
    double* wi = &w[size_t(i) * size_t(t.max_taps)];
    double total = 0.0;
    for (int64_t j = 0; j < xsize; ++j) total += (wi[j] = keys_cubic((double(j + xmin) - center + 0.5) * invscale));
    if (total != 0.0)
      for (int64_t j = 0; j < xsize; ++j) w_max = std::max(w_max, wi[j] /= total);
    t.first[size_t(i)] = int(xmin);
    t.count[size_t(i)] = int(xsize);
  }
  for (t.precision = 0; t.precision < 22; ++t.precision)
    if (int(0.5 + w_max * double(1 << (t.precision + 1))) >= (1 << 15)) break;
  t.weights.resize(w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    const double v = w[k] * double(1 << t.precision);
    t.weights[k] = int16_t(v < 0 ? int(-0.5 + v) : int(0.5 + v));
  }
  return t;
}

// One output sample of each channel from `count` source pixels `step` bytes apart.
void sample(const uint8_t* src, size_t step, const Int16Taps& t, int i, uint8_t* dst) {
  const int16_t* w = &t.weights[size_t(i) * size_t(t.max_taps)];
  const uint8_t* s = src + size_t(t.first[size_t(i)]) * step;
  const int round = t.precision > 0 ? 1 << (t.precision - 1) : 0;
  int acc[3] = {round, round, round};
  for (int j = 0; j < t.count[size_t(i)]; ++j)
    for (int c = 0; c < 3; ++c) acc[c] += int(s[size_t(j) * step + size_t(c)]) * w[j];
  for (int c = 0; c < 3; ++c) dst[c] = uint8_t(std::clamp(acc[c] >> t.precision, 0, 255));
}

}  // namespace

RgbImage resize_bicubic_torch(const RgbImage& in, int out_width, int out_height) {
  if (out_width <= 0 || out_height <= 0 || in.width <= 0 || in.height <= 0)
    throw Error("cannot resize an image to " + std::to_string(out_width) + "x" + std::to_string(out_height));
  RgbImage cur = in;
  if (out_width != in.width) {
    const Int16Taps t = precompute(in.width, out_width);
    RgbImage out{out_width, in.height, std::vector<uint8_t>(size_t(out_width) * size_t(in.height) * 3)};
    for (int y = 0; y < in.height; ++y)
      for (int x = 0; x < out_width; ++x)
        sample(&cur.pixels[size_t(y) * size_t(cur.width) * 3], 3, t, x,
               &out.pixels[(size_t(y) * size_t(out_width) + size_t(x)) * 3]);
    cur = std::move(out);
  }
  if (out_height != in.height) {
    const Int16Taps t = precompute(in.height, out_height);
    const size_t stride = size_t(cur.width) * 3;
    RgbImage out{cur.width, out_height, std::vector<uint8_t>(stride * size_t(out_height))};
    for (int y = 0; y < out_height; ++y)
      for (int x = 0; x < cur.width; ++x)
        sample(&cur.pixels[size_t(x) * 3], stride, t, y, &out.pixels[size_t(y) * stride + size_t(x) * 3]);
    cur = std::move(out);
  }
  return cur;
}

}  // namespace fs::vision

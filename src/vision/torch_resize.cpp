#include "vision/torch_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "vision/parallel_rows.h"

namespace fs::vision {

namespace {

constexpr int kMinRowsPerThread = 8;

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

// Output rows [y0, y1) of a pass: each output sample of each channel from `count` source pixels `step` bytes apart,
// the source of (row y, sample i) at y·row_step + first[i]·step. Locals instead of members so the byte stores alias
// nothing read.
void sample_rows(const uint8_t* in, size_t row_step, size_t step, const Int16Taps& t, bool taps_by_row, int samples,
                 uint8_t* out, int y0, int y1) {
  const int16_t* weights = t.weights.data();
  const int* first = t.first.data();
  const int* count = t.count.data();
  const size_t max_taps = size_t(t.max_taps);
  const unsigned precision = t.precision;
  const int round = precision > 0 ? 1 << (precision - 1) : 0;
  for (int y = y0; y < y1; ++y)
    for (int x = 0; x < samples; ++x) {
      const int i = taps_by_row ? y : x;
      const int16_t* w = weights + size_t(i) * max_taps;
      const uint8_t* s = in + size_t(taps_by_row ? 0 : y) * row_step + size_t(taps_by_row ? x * 3 : 0) +
                         size_t(first[i]) * step;
      int acc[3] = {round, round, round};
      for (int j = 0; j < count[i]; ++j)
        for (int c = 0; c < 3; ++c) acc[c] += int(s[size_t(j) * step + size_t(c)]) * w[j];
      uint8_t* d = out + (size_t(y) * size_t(samples) + size_t(x)) * 3;
      for (int c = 0; c < 3; ++c) d[c] = uint8_t(std::clamp(acc[c] >> precision, 0, 255));
    }
}

}  // namespace

RgbImage resize_bicubic_torch(const RgbImage& in, int out_width, int out_height) {
  if (out_width <= 0 || out_height <= 0 || in.width <= 0 || in.height <= 0)
    throw Error("cannot resize an image to " + std::to_string(out_width) + "x" + std::to_string(out_height));
  RgbImage wide;
  if (out_width != in.width) {
    const Int16Taps t = precompute(in.width, out_width);
    wide = RgbImage{out_width, in.height, std::vector<uint8_t>(size_t(out_width) * size_t(in.height) * 3)};
    parallel_rows(in.height, kMinRowsPerThread, [&](int y0, int y1) {
      sample_rows(in.pixels.data(), size_t(in.width) * 3, 3, t, false, out_width, wide.pixels.data(), y0, y1);
    });
  }
  const RgbImage& cur = out_width != in.width ? wide : in;
  if (out_height == in.height) {
    if (out_width != in.width) return wide;
    return in;
  }
  const Int16Taps t = precompute(in.height, out_height);
  const size_t stride = size_t(cur.width) * 3;
  RgbImage out{cur.width, out_height, std::vector<uint8_t>(stride * size_t(out_height))};
  parallel_rows(out_height, kMinRowsPerThread, [&](int y0, int y1) {
    sample_rows(cur.pixels.data(), stride, stride, t, true, cur.width, out.pixels.data(), y0, y1);
  });
  return out;
}

}  // namespace fs::vision

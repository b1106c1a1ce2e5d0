#include "vision/pil_resize.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "vision/parallel_rows.h"

namespace fs::vision {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr int kMinRowsPerThread = 8;

double bicubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// Filter taps of each output index: first source index, tap count and fixed-point weights (ksize per output).
struct Taps {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};

Taps precompute(int in_size, int out_size) {
  const double support_base = 2.0;
  double scale = double(in_size) / out_size;
  double filterscale = scale < 1.0 ? 1.0 : scale;
  double support = support_base * filterscale;
  Taps t;
  t.ksize = int(std::ceil(support)) * 2 + 1;
  t.first.resize(size_t(out_size));
  t.count.resize(size_t(out_size));
  t.weights.assign(size_t(out_size) * size_t(t.ksize), 0);
  std::vector<double> k(size_t(t.ksize));
  for (int xx = 0; xx < out_size; ++xx) {
    double center = (xx + 0.5) * scale;
    double ss = 1.0 / filterscale;
    int xmin = int(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = int(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) ww += (k[size_t(x)] = bicubic((x + xmin - center + 0.5) * ss));
    for (int x = 0; x < xmax; ++x) {
      double w = ww != 0.0 ? k[size_t(x)] / ww : k[size_t(x)];
      t.weights[size_t(xx) * t.ksize + size_t(x)] =
          w < 0 ? int32_t(-0.5 + w * (1 << kPrecisionBits)) : int32_t(0.5 + w * (1 << kPrecisionBits));
    }
    t.first[size_t(xx)] = xmin;
    t.count[size_t(xx)] = xmax;
  }
  return t;
}

uint8_t clip8(int32_t v) {
  v >>= kPrecisionBits;
  return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
}

// Output rows [y0, y1) of the horizontal pass; locals instead of members so the byte stores alias nothing read.
void horizontal_rows(const uint8_t* in, int in_width, const Taps& t, int out_width, uint8_t* out, int y0, int y1) {
  const int32_t* weights = t.weights.data();
  const int* first = t.first.data();
  const int* count = t.count.data();
  const size_t ksize = size_t(t.ksize);
  for (int y = y0; y < y1; ++y) {
    const uint8_t* row = in + size_t(y) * size_t(in_width) * 3;
    for (int xx = 0; xx < out_width; ++xx) {
      const int32_t* k = weights + size_t(xx) * ksize;
      int32_t s[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (int x = 0; x < count[xx]; ++x) {
        const uint8_t* p = row + size_t(x + first[xx]) * 3;
        for (int c = 0; c < 3; ++c) s[c] += int32_t(p[c]) * k[x];
      }
      uint8_t* o = out + (size_t(y) * size_t(out_width) + size_t(xx)) * 3;
      for (int c = 0; c < 3; ++c) o[c] = clip8(s[c]);
    }
  }
}

// Output rows [y0, y1) of the vertical pass, `stride` bytes each.
void vertical_rows(const uint8_t* in, size_t stride, const Taps& t, uint8_t* out, int y0, int y1) {
  const int32_t* weights = t.weights.data();
  const int* first = t.first.data();
  const int* count = t.count.data();
  const size_t ksize = size_t(t.ksize);
  for (int yy = y0; yy < y1; ++yy) {
    const int32_t* k = weights + size_t(yy) * ksize;
    const uint8_t* src = in + size_t(first[yy]) * stride;
    const int taps = count[yy];
    uint8_t* o = out + size_t(yy) * stride;
    for (size_t i = 0; i < stride; ++i) {
      int32_t s = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < taps; ++y) s += int32_t(src[size_t(y) * stride + i]) * k[y];
      o[i] = clip8(s);
    }
  }
}

RgbImage horizontal(const RgbImage& in, int out_width) {
  const Taps t = precompute(in.width, out_width);
  RgbImage out{out_width, in.height, std::vector<uint8_t>(size_t(out_width) * size_t(in.height) * 3)};
  parallel_rows(in.height, kMinRowsPerThread, [&](int y0, int y1) {
    horizontal_rows(in.pixels.data(), in.width, t, out_width, out.pixels.data(), y0, y1);
  });
  return out;
}

RgbImage vertical(const RgbImage& in, int out_height) {
  const Taps t = precompute(in.height, out_height);
  const size_t stride = size_t(in.width) * 3;
  RgbImage out{in.width, out_height, std::vector<uint8_t>(stride * size_t(out_height))};
  parallel_rows(out_height, kMinRowsPerThread,
                [&](int y0, int y1) { vertical_rows(in.pixels.data(), stride, t, out.pixels.data(), y0, y1); });
  return out;
}

}  // namespace

RgbImage resize_bicubic_pil(const RgbImage& in, int out_width, int out_height) {
  if (out_width <= 0 || out_height <= 0 || in.width <= 0 || in.height <= 0)
    throw Error("cannot resize an image to " + std::to_string(out_width) + "x" + std::to_string(out_height));
  if (out_width == in.width && out_height == in.height) return in;
  if (out_width == in.width) return vertical(in, out_height);
  RgbImage wide = horizontal(in, out_width);
  if (out_height == in.height) return wide;
  return vertical(wide, out_height);
}

}  // namespace fs::vision

// The drafters' approximate int8 matmul: within the bound its rounding allows of the exact products, the same bits
// with AVX-512 VNNI as in portable code, and a row's result independent of the rows beside it.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/int8_rows.h"
#include "backends/cpu/ops.h"

namespace fs::cpu {
namespace {

struct Shape {
  int n, k;
};
// One block, several blocks beside the 8-block tiles' remainder, and the fortune-draft shapes.
const Shape kShapes[] = {{16, 4}, {48, 36}, {144, 100}, {256, 256}, {640, 256}, {256, 640}, {8192, 256}};

std::vector<float> normal(size_t n, uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

WeightMatrix f32_matrix(const std::vector<float>& data, int rows, int cols) {
  WeightMatrix w;
  w.dtype = DType::F32;
  w.data = data.data();
  w.rows = rows;
  w.cols = cols;
  return w;
}

TEST(CpuInt8, ShapesThatFitTheBlocks) {
  std::vector<float> data(64 * 64);
  EXPECT_TRUE(int8_fits(f32_matrix(data, 32, 8)));
  EXPECT_FALSE(int8_fits(f32_matrix(data, 24, 8)));
  EXPECT_FALSE(int8_fits(f32_matrix(data, 32, 6)));
}

TEST(CpuInt8, ResultsLieWithinTheRoundingBound) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE("n " + std::to_string(s.n) + " k " + std::to_string(s.k));
    const int rows = 5;
    const auto wdata = normal(size_t(s.n) * size_t(s.k), 7, 0.05f);
    auto x = normal(size_t(rows) * size_t(s.k), 11, 1.0f);
    // Row 3 all zeros, row 4 one value throughout: ranges that only reach 0 from one side.
    std::fill_n(x.begin() + 3 * s.k, s.k, 0.0f);
    std::fill_n(x.begin() + 4 * s.k, s.k, 2.5f);
    const auto bias = normal(size_t(s.n), 13, 0.1f);
    const WeightMatrix w = f32_matrix(wdata, s.n, s.k);
    const auto q = quantize_rows(w);
    std::vector<float> y(size_t(rows) * size_t(s.n));
    matmul_int8(x.data(), rows, *q, bias.data(), y.data());
    size_t worst_n = 0;
    double worst = 0;
    for (int m = 0; m < rows; ++m) {
      const float* xr = x.data() + size_t(m) * size_t(s.k);
      double xmin = 0, xmax = 0, xabs = 0;
      for (int k = 0; k < s.k; ++k) {
        xmin = std::min(xmin, double(xr[k]));
        xmax = std::max(xmax, double(xr[k]));
        xabs += std::fabs(xr[k]);
      }
      const double sx = (xmax - xmin) / 255;
      for (int n = 0; n < s.n; ++n) {
        const float* wr = wdata.data() + size_t(n) * size_t(s.k);
        double exact = bias[size_t(n)], wmax = 0, wabs = 0;
        for (int k = 0; k < s.k; ++k) {
          exact += double(xr[k]) * double(wr[k]);
          wmax = std::max(wmax, double(std::fabs(wr[k])));
          wabs += std::fabs(wr[k]);
        }
        const double sw = wmax / 127;
        // x = x̂ + e with |e| ≤ sx / 2, w = ŵ + d with |d| ≤ sw / 2; x·w − x̂·ŵ = e·w + x̂·d.
        const double bound = sx / 2 * wabs + sw / 2 * (xabs + s.k * sx / 2);
        const double err = std::fabs(double(y[size_t(m) * size_t(s.n) + size_t(n)]) - exact);
        EXPECT_LE(err, bound * 1.001 + 1e-5) << "row " << m << " column " << n;
        if (err / bound > worst) worst = err / bound, worst_n = size_t(n);
      }
    }
    EXPECT_GT(worst, 0.0) << "column " << worst_n;  // the rounding shows: these are not the exact products
  }
}

TEST(CpuInt8, VnniAndPortableSumsGiveTheSameBitsForAnyRowCount) {
  if (!int8_vnni_available()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  for (const Shape& s : kShapes) {
    SCOPED_TRACE("n " + std::to_string(s.n) + " k " + std::to_string(s.k));
    const int rows = 7;
    const auto wdata = normal(size_t(s.n) * size_t(s.k), 3, 0.05f);
    const auto x = normal(size_t(rows) * size_t(s.k), 5, 1.0f);
    const auto q = quantize_rows(f32_matrix(wdata, s.n, s.k));
    std::vector<float> fast(size_t(rows) * size_t(s.n)), portable(fast.size());
    matmul_int8(x.data(), rows, *q, nullptr, fast.data(), true);
    matmul_int8(x.data(), rows, *q, nullptr, portable.data(), false);
    EXPECT_EQ(std::memcmp(fast.data(), portable.data(), fast.size() * sizeof(float)), 0);
    for (int m = 0; m < rows; ++m) {
      std::vector<float> alone(size_t(s.n));
      matmul_int8(x.data() + size_t(m) * size_t(s.k), 1, *q, nullptr, alone.data(), true);
      EXPECT_EQ(std::memcmp(alone.data(), fast.data() + size_t(m) * size_t(s.n), alone.size() * sizeof(float)), 0)
          << "row " << m;
    }
  }
}

TEST(CpuInt8, MatmulReadsTheInt8CopyWhenSet) {
  constexpr int n = 32, k = 16;
  const auto wdata = normal(size_t(n) * size_t(k), 17, 0.05f);
  const auto x = normal(size_t(k), 19, 1.0f);
  WeightMatrix w = f32_matrix(wdata, n, k);
  w.int8 = quantize_rows(w);
  std::vector<float> via_matmul(n), direct(n);
  matmul(x.data(), 1, w, nullptr, via_matmul.data());
  matmul_int8(x.data(), 1, *w.int8, nullptr, direct.data());
  EXPECT_EQ(std::memcmp(via_matmul.data(), direct.data(), direct.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace fs::cpu

// The Qwen3.5 tower's own kernels (LayerNorm with bias, padded GELU, learned position taps) against CPU loops on
// random inputs of several shapes, and each row's bits alone equal to its bits among other rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <tuple>

#include "backends/cuda/kernels/vision_ops.h"
#include "core/dtype.h"
#include "gpu_fixture.h"
#include "vision/tower_ops.h"

namespace fs::test {
namespace {

namespace k = cuda::kernels;

std::vector<float> row_of(const std::vector<float>& m, int r, int dim) {
  return {m.begin() + ptrdiff_t(r) * dim, m.begin() + ptrdiff_t(r + 1) * dim};
}

TEST(VisionBlockKernels, LayerNormMatchesTheCpuTowerAndRowsAreAlone) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(21);
  for (auto [rows, dim] : {std::pair{1, 8}, {5, 64}, {37, 1152}, {3, 1000}, {2, 3}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(dim));
    auto x = random_floats(rng, size_t(rows) * dim, 2.0f);
    for (int r = 0; r < rows; ++r) x[size_t(r) * dim] += float(r) * 3.0f;  // rows of different means
    auto w = random_floats(rng, size_t(dim)), b = random_floats(rng, size_t(dim));
    const float* dw = gpu.upload(w);
    const float* db = gpu.upload(b);
    auto run = [&](const std::vector<float>& in, int n) {
      uint16_t* out = gpu.poisoned<uint16_t>(size_t(n) * dim);
      k::layer_norm_bf16(gpu.upload(in), dw, db, n, dim, 1e-6f, out, gpu.stream());
      return gpu.download(out, size_t(n) * dim);
    };
    const auto got = run(x, rows);
    std::vector<float> ref(x.size());
    vision::layer_norm(x.data(), w.data(), b.data(), rows, dim, 1e-6f, ref.data());
    size_t wrong = 0;
    for (size_t i = 0; i < ref.size(); ++i) wrong += std::abs(int(got[i]) - int(f32_to_bf16(ref[i]))) > 1;
    EXPECT_EQ(wrong, 0u);
    for (int r = 0; r < rows; ++r) {
      const auto alone = run(row_of(x, r, dim), 1);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), got.begin() + ptrdiff_t(r) * dim)) << "row " << r;
    }
  }
}

TEST(VisionBlockKernels, GeluPaddedMatchesDoubleGeluAndZeroesThePadding) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(22);
  for (bool tanh_form : {true, false})
    for (auto [rows, cols, stride] : {std::tuple{1, 8, 8}, {3, 100, 104}, {17, 4304, 4304}, {2, 5, 40}}) {
      SCOPED_TRACE(std::string(tanh_form ? "tanh " : "erf ") + std::to_string(rows) + "x" + std::to_string(cols));
      auto x = random_floats(rng, size_t(rows) * cols, 3.0f);
      uint16_t* out = gpu.poisoned<uint16_t>(size_t(rows) * stride);
      k::gelu_padded(gpu.upload(x), rows, cols, stride, tanh_form, out, gpu.stream());
      const auto got = gpu.download(out, size_t(rows) * stride);
      std::vector<float> cpu = x;
      if (tanh_form)
        vision::gelu_tanh(cpu);
      else
        vision::gelu_erf(cpu);
      for (int r = 0; r < rows; ++r)
        for (int f = 0; f < stride; ++f) {
          const uint16_t g = got[size_t(r) * stride + f];
          if (f >= cols) {
            EXPECT_EQ(g, 0u) << "padding " << r << "," << f;
            continue;
          }
          const double v = x[size_t(r) * cols + f];
          const double ref = tanh_form ? 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)))
                                       : 0.5 * v * (1.0 + std::erf(v * M_SQRT1_2));
          // One bf16 rounding of the value, plus float's error where 1 + tanh or 1 + erf cancels.
          EXPECT_LE(std::abs(bf16_to_f32(g) - ref), 4e-3 * std::abs(ref) + 1e-6) << "x = " << v;
          // Beside the CPU's float GELU within one bf16 step, except in the negative tail where 1 + erf/tanh
          // cancels and each float library keeps different digits (the double check above covers it).
          if (v > -3.0) {
            EXPECT_LE(std::abs(int(g) - int(f32_to_bf16(cpu[size_t(r) * cols + f]))), 1) << "x = " << v;
          }
        }
      // A row alone gives the bits it had among the others.
      const int last = rows - 1;
      uint16_t* alone = gpu.poisoned<uint16_t>(size_t(stride));
      k::gelu_padded(gpu.upload(row_of(x, last, cols)), 1, cols, stride, tanh_form, alone, gpu.stream());
      const auto a = gpu.download(alone, size_t(stride));
      EXPECT_TRUE(std::equal(a.begin(), a.end(), got.begin() + ptrdiff_t(last) * stride));
    }
}

TEST(VisionBlockKernels, PositionTapsMatchTheCpuTowerSumAndRowsAreAlone) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(23);
  for (auto [rows, dim, grid_rows] : {std::tuple{1, 8, 4}, {35, 64, 256}, {300, 1152, 2304}, {7, 40, 9}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(dim));
    auto x = random_floats(rng, size_t(rows) * dim);
    auto grid = random_floats(rng, size_t(grid_rows) * dim);
    std::vector<int32_t> index(size_t(rows) * 4);
    for (auto& i : index) i = int32_t(rng() % uint32_t(grid_rows));
    std::vector<float> weight(index.size());
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (auto& w : weight) w = u(rng);
    const float* dgrid = gpu.upload(grid);
    auto run = [&](std::vector<float> in, const std::vector<int32_t>& ix, const std::vector<float>& wt, int n) {
      float* d = gpu.upload(in);
      k::add_position_taps(d, dgrid, gpu.upload(ix), gpu.upload(wt), n, dim, gpu.stream());
      return gpu.download(d, in.size());
    };
    const auto got = run(x, index, weight, rows);
    // The CPU tower's loop: the four taps summed from zero in order, then added to the row.
    size_t wrong = 0;
    for (int r = 0; r < rows; ++r)
      for (int d = 0; d < dim; ++d) {
        float pos = 0.0f;
        for (int t = 0; t < 4; ++t)
          pos += grid[size_t(index[size_t(r) * 4 + t]) * dim + d] * weight[size_t(r) * 4 + t];
        const float ref = x[size_t(r) * dim + d] + pos;
        wrong += std::abs(got[size_t(r) * dim + d] - ref) > 1e-6f * (1.0f + std::abs(ref));
      }
    EXPECT_EQ(wrong, 0u);
    const int r = rows / 2;
    const auto alone = run(row_of(x, r, dim), {index.begin() + r * 4, index.begin() + r * 4 + 4},
                           {weight.begin() + r * 4, weight.begin() + r * 4 + 4}, 1);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), got.begin() + ptrdiff_t(r) * dim));
  }
}

}  // namespace
}  // namespace fs::test

// Each CUDA kernel against a plain CPU loop on random inputs of several shapes, and the GEMM's batch invariance.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>

#include "backends/cpu/ops.h"
#include "backends/cuda/kernels/ops.h"
#include "core/dtype.h"
#include "core/error.h"
#include "gpu_fixture.h"
#include "support/fixtures.h"

namespace fs::test {

namespace {

namespace k = cuda::kernels;

struct GemmShape {
  int m, n, k;
};

constexpr k::HalfType kHalfTypes[] = {k::HalfType::bf16, k::HalfType::f16};

const char* half_name(k::HalfType t) { return t == k::HalfType::f16 ? "f16" : "bf16"; }

// The values as 16-bit floats of type t, and back.
std::vector<uint16_t> to_halves(k::HalfType t, const std::vector<float>& v) {
  if (t == k::HalfType::bf16) return to_bf16(v);
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_f16(v[i]);
  return out;
}

std::vector<float> from_halves(k::HalfType t, const std::vector<uint16_t>& v) {
  if (t == k::HalfType::bf16) return from_bf16(v);
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f16_to_f32(v[i]);
  return out;
}

// Empty when a and b hold the same bits, else how many of the n elements differ and by how much at most.
std::string bit_difference(const float* a, const float* b, size_t n) {
  size_t differ = 0;
  double largest = 0, relative = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) == 0) continue;
    ++differ;
    const double d = std::fabs(double(a[i]) - double(b[i]));
    largest = std::max(largest, d);
    relative = std::max(relative, d / std::max(std::fabs(double(b[i])), 1e-30));
  }
  if (differ == 0) return {};
  return std::to_string(differ) + " of " + std::to_string(n) + " elements differ, by at most " +
         std::to_string(largest) + " (relative " + std::to_string(relative) + ")";
}

TEST(CudaKernels, GemmMatchesDoubleReference) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(1);
  // k from one partial block to many 2048-wide slices, a partial last slice and more slices than one round holds.
  for (GemmShape s : {GemmShape{1, 64, 64}, {5, 100, 48}, {17, 300, 96}, {64, 128, 1024}, {130, 257, 80},
                      {300, 512, 392}, {1, 4096, 4096}, {3, 200, 1032}, {9, 70, 3080}, {40, 96, 3080},
                      {1, 64, 14336}, {70, 40, 14336}, {2, 48, 34824}})
    for (k::HalfType halves : kHalfTypes) {
      SCOPED_TRACE(std::string(half_name(halves)) + " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                   " k=" + std::to_string(s.k));
      auto x = from_halves(halves, to_halves(halves, random_floats(rng, size_t(s.m) * s.k)));
      auto w = from_halves(halves, to_halves(halves, random_floats(rng, size_t(s.n) * s.k, 0.05f)));
      auto bias = random_floats(rng, size_t(s.n));
      auto base = random_floats(rng, size_t(s.m) * s.n);
      std::vector<float> want(base.size());
      for (int i = 0; i < s.m; ++i)
        for (int j = 0; j < s.n; ++j) {
          double acc = 0;
          for (int t = 0; t < s.k; ++t) acc += double(x[size_t(i) * s.k + t]) * w[size_t(j) * s.k + t];
          want[size_t(i) * s.n + j] = float(base[size_t(i) * s.n + j] + (acc + bias[size_t(j)]));
        }
      uint16_t* xd = gpu.upload(to_halves(halves, x));
      uint16_t* wd = gpu.upload(to_halves(halves, w));
      float* bd = gpu.upload(bias);
      // `gemm` (-1), then every variant.
      for (int v = -1; v < k::gemm_variants(); ++v) {
        SCOPED_TRACE("variant " + std::to_string(v));
        float* y = gpu.upload(base);
        if (v < 0) k::gemm(xd, wd, bd, y, s.m, s.n, s.k, true, gpu.stream(), halves);
        else k::gemm_variant(v, xd, wd, bd, y, s.m, s.n, s.k, true, gpu.stream(), halves);
        EXPECT_LE(rel_l2(gpu.download(y, size_t(s.m) * s.n), want), 1e-5);
      }
    }
}

TEST(CudaKernels, GemmRowBitsDoNotDependOnRowCount) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(2);
  // (M, N, K): a few row tiles of every kernel, then prefill-sized row counts.
  for (auto [M, N, K] : {std::array{200, 777, 520}, {200, 777, 3080}, {4096, 200, 3080}})
    for (k::HalfType halves : kHalfTypes) {
      SCOPED_TRACE(std::string(half_name(halves)) + " M " + std::to_string(M) + " k " + std::to_string(K));
      auto x = to_halves(halves, random_floats(rng, size_t(M) * K));
      auto w = to_halves(halves, random_floats(rng, size_t(N) * K, 0.05f));
      uint16_t* xd = gpu.upload(x);
      uint16_t* wd = gpu.upload(w);
      // Outputs reused (poisoned again) by every run, so both half types fit the test's arena.
      float* full = gpu.poisoned<float>(size_t(M) * N);
      float* part = gpu.poisoned<float>(size_t(M) * N);
      // `gemm` (-1), then every variant: each row's bits are the same alone as among all M rows.
      for (int v = -1; v < k::gemm_variants(); ++v) {
        SCOPED_TRACE("variant " + std::to_string(v));
        auto run = [&](int first, int m, float* out) {
          if (v < 0) k::gemm(xd + size_t(first) * K, wd, nullptr, out, m, N, K, false, gpu.stream(), halves);
          else k::gemm_variant(v, xd + size_t(first) * K, wd, nullptr, out, m, N, K, false, gpu.stream(), halves);
        };
        gpu.poison(full, size_t(M) * N);
        run(0, M, full);
        auto want = gpu.download(full, size_t(M) * N);
        for (float value : want) ASSERT_FALSE(std::isnan(value));
        for (int first : {0, 3, 150, 199, 2047})
          for (int m : {1, 2, 8, 9, 15, 16, 17, 32, 33, 40, 64, 65, 130, 2049}) {
            if (first + m > M) continue;
            SCOPED_TRACE("rows " + std::to_string(first) + ".." + std::to_string(first + m));
            gpu.poison(part, size_t(m) * N);
            run(first, m, part);
            auto got = gpu.download(part, size_t(m) * N);
            EXPECT_EQ("", bit_difference(got.data(), want.data() + size_t(first) * N, got.size()));
          }
      }
    }
}

TEST(CudaKernels, GemmTileVariantsGiveTheSameBits) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(4);
  for (GemmShape s : {GemmShape{1, 777, 520}, {16, 130, 4096}, {40, 257, 1000}, {130, 300, 264}, {1, 300, 1024},
                      {5, 130, 1032}, {16, 96, 3080}, {33, 72, 3080}, {40, 64, 14336}, {1, 72, 17416},
                      {130, 100, 3080}, {70, 200, 10248}, {24, 300, 0}, {3, 70, 67600}})
    for (k::HalfType halves : kHalfTypes) {
      SCOPED_TRACE(std::string(half_name(halves)) + " m " + std::to_string(s.m) + " n " + std::to_string(s.n) + " k " +
                   std::to_string(s.k));
      auto x = to_halves(halves, random_floats(rng, size_t(s.m) * s.k));
      auto w = to_halves(halves, random_floats(rng, size_t(s.n) * s.k, 0.05f));
      auto bias = random_floats(rng, size_t(s.n));
      uint16_t* xd = gpu.upload(x);
      uint16_t* wd = gpu.upload(w);
      float* bd = gpu.upload(bias);
      float* ref = gpu.poisoned<float>(size_t(s.m) * s.n);
      k::gemm(xd, wd, bd, ref, s.m, s.n, s.k, false, gpu.stream(), halves);
      auto want = gpu.download(ref, size_t(s.m) * s.n);
      for (float v : want) ASSERT_FALSE(std::isnan(v));
      std::vector<float> other_bits;  // the first variant without gemm's bits; the others of its kind give these
      for (int v = 0; v < k::gemm_variants(); ++v) {
        SCOPED_TRACE("variant " + std::to_string(v) + " (" + k::gemm_variant_name(v) + ")");
        float* out = gpu.poisoned<float>(size_t(s.m) * s.n);
        k::gemm_variant(v, xd, wd, bd, out, s.m, s.n, s.k, false, gpu.stream(), halves);
        auto got = gpu.download(out, size_t(s.m) * s.n);
        if (k::gemm_variant_has_gemm_bits(v)) EXPECT_EQ("", bit_difference(got.data(), want.data(), got.size()));
        else if (other_bits.empty()) other_bits = got;
        else EXPECT_EQ("", bit_difference(got.data(), other_bits.data(), got.size()));
      }
    }
}

// `gemm` runs the weights-as-A kernels for 1…64 rows and the x-as-A kernel above, always one with gemm's bits.
TEST(CudaKernels, GemmPicksTheRowsKernelsUpTo64Rows) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  for (auto [n, k] : {std::array{6144, 4096}, {4096, 14336}, {5120, 17408}, {34816, 5120}, {128256, 4096}})
    for (int m : {1, 8, 9, 16, 17, 32, 33, 64, 65, 2048}) {
      const int v = k::gemm_picked_variant(m, n, k);
      SCOPED_TRACE("m " + std::to_string(m) + " n " + std::to_string(n) + ": " + k::gemm_variant_name(v));
      EXPECT_EQ(std::string_view(k::gemm_variant_name(v)).starts_with("wgmma rows"), m <= 64);
      EXPECT_TRUE(k::gemm_variant_has_gemm_bits(v));
    }
}

// The gate|up GEMM with its SwiGLU epilogue == gemm, then swiglu, bit for bit, for every variant with gemm's bits.
TEST(CudaKernels, GemmSwigluEqualsGemmThenSwiglu) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(5);
  struct Shape {
    int m, ffn, k;
  };
  for (Shape s : {Shape{1, 8, 64}, {3, 40, 520}, {8, 96, 1032}, {16, 520, 4096}, {17, 136, 96}, {33, 64, 3080},
                  {64, 1024, 384}, {65, 200, 1000}, {300, 96, 264}, {1, 7168, 4096}, {130, 3584, 2048}})
    for (k::HalfType halves : kHalfTypes) {
      SCOPED_TRACE(std::string(half_name(halves)) + " m " + std::to_string(s.m) + " ffn " + std::to_string(s.ffn) + " k " +
                   std::to_string(s.k));
      const size_t gu_size = size_t(s.m) * 2 * s.ffn, act_size = size_t(s.m) * s.ffn;
      uint16_t* xd = gpu.upload(to_halves(halves, random_floats(rng, size_t(s.m) * s.k)));
      uint16_t* wd = gpu.upload(to_halves(halves, random_floats(rng, size_t(2 * s.ffn) * s.k, 0.1f)));
      float* gu = gpu.poisoned<float>(gu_size);
      uint16_t* ref = gpu.poisoned<uint16_t>(act_size);
      k::gemm(xd, wd, nullptr, gu, s.m, 2 * s.ffn, s.k, false, gpu.stream(), halves);
      k::swiglu(gu, s.m, s.ffn, ref, gpu.stream());
      const auto want = gpu.download(ref, act_size);
      uint16_t* fused = gpu.poisoned<uint16_t>(act_size);
      k::gemm_swiglu(xd, wd, fused, s.m, s.ffn, s.k, gpu.stream(), halves);
      EXPECT_EQ(gpu.download(fused, act_size), want) << "gemm_swiglu";
      for (int v = 0; v < k::gemm_variants(); ++v) {
        if (!k::gemm_variant_has_gemm_bits(v)) continue;
        SCOPED_TRACE("variant " + std::to_string(v) + " (" + k::gemm_variant_name(v) + ")");
        uint16_t* out = gpu.poisoned<uint16_t>(act_size);
        k::gemm_swiglu_variant(v, xd, wd, out, s.m, s.ffn, s.k, gpu.stream(), halves);
        EXPECT_EQ(gpu.download(out, act_size), want);
      }
    }
  EXPECT_THROW(k::gemm_swiglu(nullptr, nullptr, nullptr, 1, 12, 64, gpu.stream()), Error);
}

TEST(CudaKernels, EmbeddingRmsnormSwiglu) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(3);
  for (int dim : {32, 48, 384, 4096, 5120, 8200}) {  // 8200: past the rows RMSNorm holds in registers
    SCOPED_TRACE("dim " + std::to_string(dim));
    const int vocab = 50, rows = 7;
    auto table = to_bf16(random_floats(rng, size_t(vocab) * dim));
    std::vector<int32_t> ids = {3, 0, 49, 3, 17, 8, 22};
    float* x = gpu.poisoned<float>(size_t(rows) * dim);
    k::embedding(gpu.upload(table), gpu.upload(ids), rows, dim, x, gpu.stream());
    auto emb = gpu.download(x, size_t(rows) * dim);
    for (int r = 0; r < rows; ++r)
      for (int d = 0; d < dim; ++d)
        ASSERT_EQ(emb[size_t(r) * dim + d], bf16_to_f32(table[size_t(ids[size_t(r)]) * dim + d]));

    auto weight = random_floats(rng, size_t(dim));
    std::vector<int32_t> gather = {6, 1, 1};
    uint16_t* yb = gpu.poisoned<uint16_t>(3 * size_t(dim));
    uint16_t* yh = gpu.poisoned<uint16_t>(3 * size_t(dim));
    float* yf = gpu.poisoned<float>(size_t(rows) * dim);
    k::rmsnorm_bf16(x, gpu.upload(gather), gpu.upload(weight), 3, dim, 1e-6f, yb, gpu.stream());
    k::rmsnorm_halves(k::HalfType::f16, x, gpu.upload(gather), gpu.upload(weight), 3, dim, 1e-6f, yh, gpu.stream());
    k::rmsnorm_f32(x, nullptr, gpu.upload(weight), rows, dim, 1e-6f, yf, gpu.stream());
    std::vector<float> want(size_t(rows) * dim);
    cpu::rmsnorm(emb.data(), weight.data(), rows, dim, 1e-6f, want.data());
    EXPECT_LE(rel_l2(gpu.download(yf, want.size()), want), 1e-6);
    std::vector<float> want_gathered;
    for (int r : gather) want_gathered.insert(want_gathered.end(), want.begin() + long(r) * dim, want.begin() + long(r + 1) * dim);
    const auto bf16_out = gpu.download(yb, 3 * size_t(dim));
    EXPECT_LE(rel_l2(from_bf16(bf16_out), want_gathered), 5e-3);
    // f16 keeps three more bits; rmsnorm_halves(bf16) is rmsnorm_bf16.
    EXPECT_LE(rel_l2(from_halves(k::HalfType::f16, gpu.download(yh, 3 * size_t(dim))), want_gathered), 5e-4);
    k::rmsnorm_halves(k::HalfType::bf16, x, gpu.upload(gather), gpu.upload(weight), 3, dim, 1e-6f, yh, gpu.stream());
    EXPECT_EQ(gpu.download(yh, 3 * size_t(dim)), bf16_out);

    auto gu = random_floats(rng, size_t(rows) * 2 * dim, 2.0f);
    uint16_t* act = gpu.poisoned<uint16_t>(size_t(rows) * dim);
    k::swiglu(gpu.upload(gu), rows, dim, act, gpu.stream());
    std::vector<float> sw(size_t(rows) * dim);
    for (int r = 0; r < rows; ++r)
      cpu::swiglu(gu.data() + size_t(r) * 2 * dim, gu.data() + size_t(r) * 2 * dim + dim, size_t(dim),
                  sw.data() + size_t(r) * dim);
    EXPECT_LE(rel_l2(from_bf16(gpu.download(act, sw.size())), sw), 5e-3);
  }
}

}  // namespace
}  // namespace fs::test

// The CUDA vision tower: each of its kernels against a CPU loop on random inputs of several shapes, then the whole
// tower against the transformers reference and the CPU tower, --vision-host bitwise equal to resident weights,
// repeated encodes bitwise equal, and its pinned memory reused.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <tuple>

#include "backends/cpu/ops.h"
#include "backends/cuda/kernels/vision_ops.h"
#include "backends/cuda/kernels/vision_tower_cuda.h"
#include "core/dtype.h"
#include "core/error.h"
#include "gpu_fixture.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "support/fixtures.h"
#include "tower_checks.h"
#include "vision/qwen2_5_vl_tower.h"
#include "vision/vision_encoder.h"
#include "vision/vision_fixtures.h"

namespace fs::test {
namespace {

namespace k = cuda::kernels;
using vision::PixelPatches;

TEST(VisionKernels, RopeMatchesTheCpuTower) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(11);
  struct Shape {
    int rows, heads, hd;
  };
  for (Shape s : {Shape{1, 1, 8}, {5, 2, 32}, {37, 16, 80}, {64, 3, 128}}) {
    SCOPED_TRACE(std::to_string(s.rows) + "x" + std::to_string(s.heads) + "x" + std::to_string(s.hd));
    const int H = s.heads * s.hd, half = s.hd / 2;
    auto qkv = random_floats(rng, size_t(s.rows) * 3 * H);
    auto angles = random_floats(rng, size_t(s.rows) * half, 3.0f);
    std::vector<float> cos(angles.size()), sin(angles.size());
    for (size_t i = 0; i < angles.size(); ++i) cos[i] = std::cos(angles[i]), sin[i] = std::sin(angles[i]);
    float* d = gpu.upload(qkv);
    k::vision_rope_qk(d, s.rows, s.heads, s.hd, gpu.upload(cos), gpu.upload(sin), gpu.stream());
    auto got = gpu.download(d, qkv.size());
    for (int part = 0; part < 3; ++part) {
      std::vector<float> ref(size_t(s.rows) * H);
      for (int r = 0; r < s.rows; ++r)
        std::copy_n(&qkv[size_t(r) * 3 * H + size_t(part) * H], H, &ref[size_t(r) * H]);
      if (part < 2) cpu::rope(ref.data(), s.rows, s.heads, s.hd, cos.data(), sin.data());
      // The device may fuse x·cos − y·sin into one FMA: equal up to a few float roundings, v unchanged.
      size_t wrong = 0;
      for (int r = 0; r < s.rows; ++r)
        for (int i = 0; i < H; ++i) {
          const float g = got[size_t(r) * 3 * H + size_t(part) * H + i], e = ref[size_t(r) * H + i];
          wrong += part == 2 ? g != e : std::abs(g - e) > 4e-7f * std::max(1.0f, std::abs(e));
        }
      EXPECT_EQ(wrong, 0u) << "part " << part;
    }
  }
}

// Softmax attention of each row over its segment in double precision.
std::vector<double> attention_reference(const std::vector<float>& qkv, const std::vector<int>& bounds, int heads,
                                        int hd, float scale) {
  const int H = heads * hd, T = bounds.back();
  std::vector<double> out(size_t(T) * H, 0.0);
  for (size_t s = 0; s + 1 < bounds.size(); ++s)
    for (int t = bounds[s]; t < bounds[s + 1]; ++t)
      for (int h = 0; h < heads; ++h) {
        std::vector<double> w;
        double mx = -1e300;
        for (int j = bounds[s]; j < bounds[s + 1]; ++j) {
          double dot = 0;
          for (int d = 0; d < hd; ++d)
            dot += double(qkv[size_t(t) * 3 * H + size_t(h) * hd + d]) *
                   double(qkv[size_t(j) * 3 * H + H + size_t(h) * hd + d]);
          w.push_back(dot * scale);
          mx = std::max(mx, w.back());
        }
        double sum = 0;
        for (double& x : w) sum += (x = std::exp(x - mx));
        for (int j = bounds[s]; j < bounds[s + 1]; ++j)
          for (int d = 0; d < hd; ++d)
            out[size_t(t) * H + size_t(h) * hd + d] +=
                w[size_t(j - bounds[s])] / sum * double(qkv[size_t(j) * 3 * H + 2 * H + size_t(h) * hd + d]);
      }
  return out;
}

// Tiles of up to `size` rows (at most kVisionTileRows), each inside one segment of `bounds`.
std::vector<k::AttentionTile> tiles_for(const std::vector<int>& bounds, int size = k::kVisionTileRows) {
  std::vector<k::AttentionTile> tiles;
  for (size_t s = 0; s + 1 < bounds.size(); ++s)
    for (int r = bounds[s]; r < bounds[s + 1]; r += size)
      tiles.push_back({r, std::min(size, bounds[s + 1] - r), bounds[s], bounds[s + 1]});
  return tiles;
}

struct AttentionError {
  double max_abs = 0, max_ref = 0, rel_l2 = 0, worst_relative = 0;
};

AttentionError attention_error(const std::vector<float>& got, const std::vector<double>& ref) {
  AttentionError e;
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(got[i]) - ref[i];
    e.max_abs = std::max(e.max_abs, std::abs(d));
    e.max_ref = std::max(e.max_ref, std::abs(ref[i]));
    e.worst_relative = std::max(e.worst_relative, std::abs(d) / (1e-2 + std::abs(ref[i])));
    diff2 += d * d;
    ref2 += ref[i] * ref[i];
  }
  e.rel_l2 = std::sqrt(diff2 / std::max(ref2, 1e-300));
  return e;
}

// Head dims that are multiples of 8 run on tensor cores (bf16 q, k, v and probabilities; 8·odd dims padded with
// zeros to a multiple of 16): within bf16 tolerance. Other head dims run the f32 kernel: within 1% per element. Both: a second call gives the same bits, and a row's
// bits do not depend on how its segment is cut into tiles.
TEST(VisionKernels, SegmentAttentionMatchesDoubleReference) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(5);
  struct Case {
    int heads, hd;
    std::vector<int> bounds;
  };
  const std::vector<Case> cases = {
      {1, 16, {0, 1}},
      {2, 16, {0, 5, 70, 200}},
      {2, 32, {0, 4, 8, 24, 64}},
      {2, 32, {0, 7, 40, 41, 100, 400}},
      {1, 48, {0, 190}},
      {1, 64, {0, 129, 256}},
      {16, 80, {0, 64, 128, 160, 224}},
      {3, 80, {0, 1, 128, 129, 257, 557}},  // segments of 1, 127, 1, 128 and 300 rows
      {1, 96, {0, 17, 150}},
      {1, 112, {0, 65}},
      {3, 128, {0, 33, 97, 397}},
      {4, 80, {0, 1000}},  // one frame: full attention
      // Tensor cores over zero-padded dims (Qwen3.5's tower: 16 heads of 72).
      {1, 8, {0, 1}},
      {2, 24, {0, 7, 40, 41, 300}},
      {2, 40, {0, 130, 260}},
      {16, 72, {0, 64, 200, 521}},
      {3, 72, {0, 1, 1000}},
      {1, 120, {0, 50, 180}},
      // The f32 kernel.
      {1, 4, {0, 1}},
      {2, 36, {0, 7, 40, 41, 300}},
      {1, 100, {0, 130, 260}},
  };
  for (const Case& c : cases) {
    const bool mma = c.hd % 8 == 0;
    SCOPED_TRACE("heads " + std::to_string(c.heads) + " head_dim " + std::to_string(c.hd) + " rows " +
                 std::to_string(c.bounds.back()) + (mma ? " (tensor cores)" : " (f32)"));
    const int T = c.bounds.back(), H = c.heads * c.hd;
    const float scale = 1.0f / std::sqrt(float(c.hd));
    auto qkv = random_floats(rng, size_t(T) * 3 * H, 1.5f);
    const float* dqkv = gpu.upload(qkv);
    auto run = [&](int tile_size) {
      auto tiles = tiles_for(c.bounds, tile_size);
      uint16_t* out = gpu.poisoned<uint16_t>(size_t(T) * H);
      k::segment_attention(dqkv, c.heads, c.hd, gpu.upload(tiles), int(tiles.size()), scale, out, gpu.stream());
      return gpu.download(out, size_t(T) * H);
    };
    const auto bits = run(k::kVisionTileRows);
    auto got = from_bf16(bits);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(std::isfinite(got[i])) << "element " << i;
    const AttentionError e = attention_error(got, attention_reference(qkv, c.bounds, c.heads, c.hd, scale));
    std::printf("head_dim %d rows %d: max abs error %.3g (max |ref| %.3g), rel L2 %.3g\n", c.hd, T, e.max_abs,
                e.max_ref, e.rel_l2);
    if (mma) {
      EXPECT_LE(e.max_abs, 2e-2 * e.max_ref);
      EXPECT_LE(e.rel_l2, 1e-2);
    } else {
      EXPECT_LE(e.worst_relative, 1e-2);
    }
    EXPECT_TRUE(bits == run(k::kVisionTileRows)) << "a second call changed the bits";
    EXPECT_TRUE(bits == run(37)) << "tiles of 37 rows changed the bits";
  }
}

// Times the kernel at the 7B tower's shape (16 heads of 80) on a 2048×1664 image's 17228 patches: one full-attention
// call and one call over windows of 256 patches; sampled rows of the full call against the double reference.
TEST(VisionKernels, SegmentAttentionAtTowerScale) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(8);
  const int T = 17228, heads = 16, hd = 80, H = heads * hd;
  const float scale = 1.0f / std::sqrt(float(hd));
  auto qkv = random_floats(rng, size_t(T) * 3 * H, 1.5f);
  const float* dqkv = gpu.upload(qkv);
  uint16_t* out = gpu.poisoned<uint16_t>(size_t(T) * H);
  auto time_us = [&](const std::vector<int>& bounds, int head_dim, int reps) {
    auto tiles = tiles_for(bounds);
    const k::AttentionTile* dt = gpu.upload(tiles);
    const int h = H / head_dim;
    k::segment_attention(dqkv, h, head_dim, dt, int(tiles.size()), scale, out, gpu.stream());
    gpu.download(out, 1);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i)
      k::segment_attention(dqkv, h, head_dim, dt, int(tiles.size()), scale, out, gpu.stream());
    gpu.download(out, 1);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / reps;
  };
  std::vector<int> windows;
  for (int r = 0; r < T; r += 256) windows.push_back(r);
  windows.push_back(T);
  const double window_us = time_us(windows, hd, 20);
  const double full_us = time_us({0, T}, hd, 5);
  std::printf("segment_attention %d rows, %d heads of %d: full attention %.1f us, windows of 256 %.1f us\n", T, heads,
              hd, full_us, window_us);
  const double f32_us = time_us({0, T}, 64 + 8, 1);  // head_dim 72: the f32 kernel, for comparison
  std::printf("f32 kernel, full attention, %d heads of 72: %.1f us\n", H / 72, f32_us);

  time_us({0, T}, hd, 1);
  const auto got = from_bf16(gpu.download(out, size_t(T) * H));
  std::vector<float> sampled_got;
  std::vector<double> sampled_ref;
  for (int t : {0, 1, 127, 128, 5000, 9999, 17100, T - 1})
    for (int h = 0; h < heads; ++h) {
      std::vector<double> w(static_cast<size_t>(T));
      double mx = -1e300, sum = 0;
      for (int j = 0; j < T; ++j) {
        double dot = 0;
        for (int d = 0; d < hd; ++d)
          dot += double(qkv[size_t(t) * 3 * H + size_t(h) * hd + d]) *
                 double(qkv[size_t(j) * 3 * H + H + size_t(h) * hd + d]);
        mx = std::max(mx, w[size_t(j)] = dot * scale);
      }
      for (double& x : w) sum += (x = std::exp(x - mx));
      for (int d = 0; d < hd; ++d) {
        double o = 0;
        for (int j = 0; j < T; ++j) o += w[size_t(j)] * double(qkv[size_t(j) * 3 * H + 2 * H + size_t(h) * hd + d]);
        sampled_ref.push_back(o / sum);
        sampled_got.push_back(got[size_t(t) * H + size_t(h) * hd + d]);
      }
    }
  const AttentionError e = attention_error(sampled_got, sampled_ref);
  std::printf("sampled rows: max abs error %.3g (max |ref| %.3g), rel L2 %.3g\n", e.max_abs, e.max_ref, e.rel_l2);
  EXPECT_LE(e.max_abs, 2e-2 * e.max_ref);
  EXPECT_LE(e.rel_l2, 1e-2);
}

TEST(VisionKernels, SwigluPaddedMatchesCpuAndZeroesThePadding) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(3);
  for (auto [rows, ffn, stride] : {std::tuple{1, 8, 8}, {3, 100, 104}, {17, 3420, 3424}, {2, 5, 40}}) {
    auto gu = random_floats(rng, size_t(rows) * 2 * ffn, 2.0f);
    uint16_t* out = gpu.poisoned<uint16_t>(size_t(rows) * stride);
    k::swiglu_padded(gpu.upload(gu), rows, ffn, stride, out, gpu.stream());
    auto got = gpu.download(out, size_t(rows) * stride);
    for (int r = 0; r < rows; ++r) {
      std::vector<float> ref(static_cast<size_t>(ffn));
      cpu::swiglu(&gu[size_t(r) * 2 * ffn], &gu[size_t(r) * 2 * ffn + ffn], size_t(ffn), ref.data());
      for (int f = 0; f < stride; ++f) {
        const uint16_t g = got[size_t(r) * stride + f];
        if (f >= ffn) {
          EXPECT_EQ(g, 0u) << "padding " << r << "," << f;
        } else {
          EXPECT_LE(std::abs(int(g) - int(f32_to_bf16(ref[size_t(f)]))), 1) << r << "," << f;
        }
      }
    }
  }
}

TEST(VisionKernels, GeluErfMatchesCpu) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(4);
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(5120 * 37)}) {
    auto x = random_floats(rng, size_t(n), 3.0f);
    uint16_t* out = gpu.poisoned<uint16_t>(size_t(n));
    k::gelu_erf(gpu.upload(x), n, out, gpu.stream());
    auto got = gpu.download(out, size_t(n));
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[size_t(i)];
      const double ref = 0.5 * v * (1.0 + std::erf(double(v) * M_SQRT1_2));
      // One bf16 rounding of the value, plus float erf's error where 1 + erf(x) cancels (x < -4).
      EXPECT_LE(std::abs(bf16_to_f32(got[size_t(i)]) - ref), 4e-3 * std::abs(ref) + 1e-6) << "x = " << v;
    }
  }
}

TEST(VisionKernels, ScatterRowsUndoesAPermutation) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(6);
  for (auto [rows, dim] : {std::pair{1, 3}, {48, 64}, {300, 3584}}) {
    std::vector<int32_t> index(static_cast<size_t>(rows));
    std::iota(index.begin(), index.end(), 0);
    std::shuffle(index.begin(), index.end(), rng);
    auto src = random_floats(rng, size_t(rows) * dim);
    float* dst = gpu.poisoned<float>(src.size());
    k::scatter_rows(gpu.upload(src), gpu.upload(index), rows, dim, dst, gpu.stream());
    auto got = gpu.download(dst, src.size());
    for (int r = 0; r < rows; ++r)
      for (int d = 0; d < dim; ++d)
        ASSERT_EQ(got[size_t(index[size_t(r)]) * dim + d], src[size_t(r) * dim + d]);
  }
}

TowerFixture load_fixture(const std::filesystem::path& shared) {
  TowerFixture f = open_tower(vl_model_dir(shared));
  const auto ref_dir = vl_reference_dir(shared);
  const auto cases = vl_cases(shared);  // kept alive: the loop below walks a member of it
  for (const auto& im : cases["images"]) add_tower_case(f, im, im["slow"], ref_dir);
  return f;
}

TEST(CudaVisionTower, MatchesReferenceAndCpuTower) {
  FS_REQUIRE_GPU();
  FS_REQUIRE_SHARED(shared);
  TowerFixture f = load_fixture(shared);
  ASSERT_FALSE(f.images.empty());
  vision::Qwen25VisionTower cpu(f.config, f.checkpoint);
  expect_matches_reference_and_cpu(f, cpu, "CUDA tower");
}

TEST(CudaVisionTower, WeightsOnHostGiveTheSameBitsAndRepeatedEncodesAgree) {
  FS_REQUIRE_GPU();
  FS_REQUIRE_SHARED(shared);
  TowerFixture f = load_fixture(shared);
  vision::VisionEncoderStats rs, ss;
  ASSERT_NO_FATAL_FAILURE(expect_host_weights_same_bits_pinned_once(f, rs, ss));
  EXPECT_GT(rs.device_weight_bytes, 0u);
  EXPECT_GE(ss.host_weight_bytes, rs.device_weight_bytes);
  EXPECT_EQ(rs.pinned_stage_bytes, ss.pinned_stage_bytes);
  EXPECT_GE(rs.pinned_stage_bytes, size_t(f.max_patches) * size_t(f.config.patch_dim()) * 2);
}

TEST(CudaVisionTower, ImageOverTheReservedSizeIsRefused) {
  FS_REQUIRE_GPU();
  FS_REQUIRE_SHARED(shared);
  TowerFixture f = load_fixture(shared);
  auto smallest = std::min_element(f.images.begin(), f.images.end(), [](const auto& a, const auto& b) {
    return a.grid.patches() < b.grid.patches();
  });
  auto largest = std::max_element(f.images.begin(), f.images.end(), [](const auto& a, const auto& b) {
    return a.grid.patches() < b.grid.patches();
  });
  ASSERT_LT(smallest->grid.patches(), largest->grid.patches());
  vision::VisionEncoderOptions o;
  o.max_patches = smallest->grid.patches();
  auto enc = cuda::create_cuda_vision_encoder(f.config, f.checkpoint, o);
  EXPECT_THROW(enc->encode(*largest), Error);
  auto out = enc->encode(*smallest);  // still usable
  EXPECT_EQ(out.size(), size_t(smallest->grid.patches() / 4) * size_t(f.config.out_hidden_size));
  o.max_patches = 0;
  EXPECT_THROW(cuda::create_cuda_vision_encoder(f.config, f.checkpoint, o), Error);
}

}  // namespace
}  // namespace fs::test

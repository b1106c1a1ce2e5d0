// The Qwen3.5 tower program on CUDA (tiny-qwen3.5-vl): features against the transformers reference and the CPU
// tower, --vision-host bitwise equal to resident weights, repeated encodes bitwise equal, its pinned memory
// allocated once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "backends/cuda/kernels/vision_tower_cuda.h"
#include "core/files.h"
#include "gpu_fixture.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "support/fixtures.h"
#include "vision/qwen3_5_vision_tower.h"

namespace fs::test {
namespace {

using vision::PixelPatches;

struct Qwen35TowerFixture {
  vision::VisionTowerConfig config;
  std::shared_ptr<Checkpoint> checkpoint;
  std::vector<std::string> names;
  std::vector<PixelPatches> images;
  std::vector<std::vector<float>> reference;
  int64_t max_patches = 0;
};

Qwen35TowerFixture load_qwen3_5(const std::filesystem::path& shared) {
  Qwen35TowerFixture f;
  const auto dir = shared / "models" / "tiny-qwen3.5-vl";
  const auto ref = shared / "reference" / "tiny-qwen3.5-vl";
  f.config = vision::VisionTowerConfig::from_json(load_model_config(dir).vision, dir.string());
  f.checkpoint = Checkpoint::open(dir);
  const json cases = read_json_file(ref / "cases.json");
  for (const auto& im : cases["images"]) {
    PixelPatches px;
    px.grid = {im["grid_thw"][0].get<int>(), im["grid_thw"][1].get<int>(), im["grid_thw"][2].get<int>()};
    px.patch_dim = im["pixel_values"]["shape"][1].get<int>();
    px.values = read_f32(ref / im["pixel_values"]["file"].get<std::string>());
    f.max_patches = std::max(f.max_patches, px.grid.patches());
    f.names.push_back(im["file"].get<std::string>());
    f.images.push_back(std::move(px));
    f.reference.push_back(read_f32(ref / im["tower_output"]["file"].get<std::string>()));
  }
  return f;
}

std::unique_ptr<vision::VisionEncoder> qwen3_5_encoder(const Qwen35TowerFixture& f, bool on_host) {
  vision::VisionEncoderOptions o;
  o.device = "cuda";
  o.weights_on_host = on_host;
  o.max_patches = f.max_patches;
  return cuda::create_cuda_vision_encoder(f.config, f.checkpoint, o);
}

TEST(CudaVisionTowerQwen35, MatchesReferenceAndCpuTower) {
  FS_REQUIRE_GPU();
  FS_REQUIRE_SHARED(shared);
  Qwen35TowerFixture f = load_qwen3_5(shared);
  ASSERT_EQ(f.config.kind, vision::VisionTowerKind::Qwen3_5);
  ASSERT_FALSE(f.images.empty());
  auto gpu = qwen3_5_encoder(f, false);
  vision::Qwen35VisionTower cpu(f.config, f.checkpoint);
  for (size_t i = 0; i < f.images.size(); ++i) {
    SCOPED_TRACE(f.names[i]);
    auto out = gpu->encode(f.images[i]);
    ASSERT_EQ(out.size(), f.reference[i].size());
    for (float v : out) ASSERT_TRUE(std::isfinite(v));
    const double vs_ref = rel_l2(out, f.reference[i]);
    const double vs_cpu = rel_l2(out, cpu.encode(f.images[i]));
    std::printf("%s: CUDA Qwen3.5 tower rel L2 %.3g vs reference, %.3g vs CPU tower\n", f.names[i].c_str(), vs_ref,
                vs_cpu);
    EXPECT_LE(vs_ref, 2e-2);
    EXPECT_LE(vs_cpu, 2e-2);
  }
}

TEST(CudaVisionTowerQwen35, WeightsOnHostGiveTheSameBitsAndPinnedMemoryIsAllocatedOnce) {
  FS_REQUIRE_GPU();
  FS_REQUIRE_SHARED(shared);
  Qwen35TowerFixture f = load_qwen3_5(shared);
  auto resident = qwen3_5_encoder(f, false);
  auto staged = qwen3_5_encoder(f, true);
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < f.images.size(); ++i) {
      SCOPED_TRACE(f.names[i] + " round " + std::to_string(round));
      auto a = resident->encode(f.images[i]);
      auto b = staged->encode(f.images[i]);
      auto a2 = resident->encode(f.images[i]);
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "--vision-host changed the bits";
      EXPECT_EQ(0, std::memcmp(a.data(), a2.data(), a.size() * sizeof(float))) << "a second encode changed the bits";
    }
  const auto rs = resident->stats(), ss = staged->stats();
  EXPECT_EQ(rs.images, 4 * f.images.size());
  EXPECT_EQ(ss.images, 2 * f.images.size());
  // The image stage (and, with --vision-host, the pinned weights) allocated once, nothing freed since.
  EXPECT_EQ(rs.pinned_allocations, 1u);
  EXPECT_EQ(ss.pinned_allocations, 2u);
  EXPECT_EQ(rs.pinned_frees, 0u);
  EXPECT_EQ(ss.pinned_frees, 0u);
  EXPECT_EQ(ss.device_weight_bytes, 0u);
  EXPECT_GT(ss.device_slot_bytes, 0u);
  EXPECT_LT(ss.device_slot_bytes, rs.device_weight_bytes);
  for (const auto& line : staged->budget_lines()) std::printf("%s\n", line.c_str());
}

}  // namespace
}  // namespace fs::test

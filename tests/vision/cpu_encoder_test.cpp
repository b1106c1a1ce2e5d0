// The CPU tower behind the VisionEncoder interface: the tower's own bits, counted encodes, --vision-host refused.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "vision/image_processor.h"
#include "vision/qwen2_5_vl_tower.h"
#include "vision/vision_encoder.h"
#include "vision_fixtures.h"

namespace fs::vision {
namespace {

TEST(CpuVisionEncoder, GivesTheTowersBitsAndCountsImages) {
  FS_REQUIRE_SHARED(shared);
  const auto dir = test::vl_model_dir(shared);
  const auto config = VisionTowerConfig::from_json(load_model_config(dir).vision, dir.string());
  auto ck = Checkpoint::open(dir);
  auto encoder = create_cpu_vision_encoder(config, ck, {});
  Qwen25VisionTower tower(config, ck);
  EXPECT_STREQ(encoder->device_name(), "cpu");
  EXPECT_EQ(encoder->weight_bytes(), tower.weight_bytes());
  const auto cases = test::vl_cases(shared);
  const auto& im = cases["images"][0];
  PixelPatches px;
  px.grid = {im["slow"]["grid_thw"][0].get<int>(), im["slow"]["grid_thw"][1].get<int>(),
             im["slow"]["grid_thw"][2].get<int>()};
  px.patch_dim = im["slow"]["pixel_values"]["shape"][1].get<int>();
  px.values = test::read_f32(test::vl_reference_dir(shared) / im["slow"]["pixel_values"]["file"].get<std::string>());
  auto a = encoder->encode(px);
  auto b = tower.encode(px);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  const VisionEncoderStats s = encoder->stats();
  EXPECT_EQ(s.images, 1u);
  EXPECT_EQ(s.host_weight_bytes, tower.weight_bytes());
  EXPECT_EQ(s.device_weight_bytes, 0u);
  EXPECT_EQ(s.pinned_allocations, 0u);
  EXPECT_FALSE(encoder->budget_lines().empty());
}

TEST(CpuVisionEncoder, RefusesWeightsOnHost) {
  FS_REQUIRE_SHARED(shared);
  const auto dir = test::vl_model_dir(shared);
  const auto config = VisionTowerConfig::from_json(load_model_config(dir).vision, dir.string());
  VisionEncoderOptions o;
  o.weights_on_host = true;
  try {
    create_cpu_vision_encoder(config, Checkpoint::open(dir), o);
    FAIL() << "--vision-host was accepted on the CPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--vision-host"), std::string::npos) << e.what();
  }
}

TEST(CpuVisionEncoder, LargestAdmittedImageCoversEveryResizedImage) {
  FS_REQUIRE_SHARED(shared);
  const auto p = ImageProcessorConfig::load(test::vl_model_dir(shared));
  const int64_t most = max_image_patches(p);
  // Images of many shapes, resized as the processor does, never exceed the bound.
  for (int w : {28, 97, 640, 2048, 4000, 9000})
    for (int h : {28, 61, 400, 1664, 3000, 8000}) {
      if (double(std::max(w, h)) / std::min(w, h) > 200) continue;
      EXPECT_LE(grid_for_size(w, h, p).patches(), most) << w << "x" << h;
    }
}

}  // namespace
}  // namespace fs::vision

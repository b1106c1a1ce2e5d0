// make-checkpoint's qwen3.5-27b preset, shrunk: its tower loads through the real Qwen3.5 tower loader (every tensor
// it reads is written, in the shape it wants) and encodes images to finite features that depend on the image.
#include <cmath>

#include <gtest/gtest.h>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "models/checkpoint_maker.h"
#include "models/vision_tower_config.h"
#include "support/checkpoint_presets.h"
#include "vision/image_processor.h"
#include "vision/qwen3_5_vision_tower.h"

namespace fs::test {
namespace {

vision::RgbImage gradient(int w, int h, int seed) {
  vision::RgbImage img{w, h, std::vector<uint8_t>(size_t(w) * size_t(h) * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        img.pixels[(size_t(y) * size_t(w) + size_t(x)) * 3 + size_t(c)] = uint8_t((x * (2 + c) + y * 3 + seed * 59) % 256);
  return img;
}

TEST(MakeCheckpointQwen35Tower, ShrunkTowerLoadsAndEncodesFiniteFeatures) {
  const json c = shrunk_qwen3_5(4, 16, 2);
  const auto dir = std::filesystem::temp_directory_path() / "fs-make-checkpoint-q35-tower";
  std::filesystem::remove_all(dir);
  make_checkpoint(c, dir, {});

  const ModelConfig mc = load_model_config(dir);
  const auto tower_config = vision::VisionTowerConfig::from_json(mc.vision, "config.json");
  ASSERT_EQ(tower_config.kind, vision::VisionTowerKind::Qwen3_5);
  vision::Qwen35VisionTower tower(tower_config, Checkpoint::open(dir));
  const auto processor = vision::ImageProcessorConfig::load(dir);
  std::vector<float> features[2];
  for (int seed : {0, 1}) {
    auto px = vision::preprocess_image(gradient(128, 96, seed), processor);
    features[seed] = tower.encode(px);
    ASSERT_EQ(features[seed].size(), size_t(px.grid.patches() / 4) * size_t(mc.hidden_size));
    for (float f : features[seed]) ASSERT_TRUE(std::isfinite(f));
  }
  EXPECT_NE(features[0], features[1]);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fs::test

// The CPU towers read the tensors their program names, in the shapes it gives them: a vision_config whose MLP
// width disagrees with the checkpoint is refused naming the program's first block MLP tensor.
#include <gtest/gtest.h>

#include "core/error.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "models/vision_program.h"
#include "support/fixtures.h"
#include "vision/qwen2_5_vl_tower.h"
#include "vision/qwen3_5_vision_tower.h"

namespace fs::test {
namespace {

// Builds Tower from the model's vision_config with intermediate_size one wider than its checkpoint's; returns the
// error message and the tensor the program names first for the block MLP.
template <class Tower>
std::pair<std::string, std::string> refusal(const std::filesystem::path& dir) {
  const auto ck = Checkpoint::open(dir);
  auto config = vision::VisionTowerConfig::from_json(load_model_config(dir).vision, dir.string());
  ++config.intermediate_size;
  const std::string name = vision_program(config, *ck).blocks.front().mlp_in.parts.front().name;
  try {
    Tower tower(config, ck);
  } catch (const Error& e) {
    return {e.what(), name};
  }
  return {"", name};
}

TEST(VisionTowerProgram, Qwen25VlTowerReadsTheProgramsShapes) {
  FS_REQUIRE_SHARED(shared);
  const auto [message, name] = refusal<vision::Qwen25VisionTower>(shared / "models" / "tiny-qwen2.5-vl");
  EXPECT_NE(message.find("tensor " + name + " has shape"), std::string::npos) << message;
}

TEST(VisionTowerProgram, Qwen35TowerReadsTheProgramsShapes) {
  FS_REQUIRE_SHARED(shared);
  const auto [message, name] = refusal<vision::Qwen35VisionTower>(shared / "models" / "tiny-qwen3.5-vl");
  EXPECT_NE(message.find("tensor " + name + " has shape"), std::string::npos) << message;
}

}  // namespace
}  // namespace fs::test

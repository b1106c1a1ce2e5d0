// The Qwen3.5 tower program on CUDA (tiny-qwen3.5-vl): features against the transformers reference and the CPU
// tower, --vision-host bitwise equal to resident weights, repeated encodes bitwise equal, its pinned memory
// allocated once.
#include <gtest/gtest.h>

#include "core/files.h"
#include "gpu_fixture.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "support/fixtures.h"
#include "tower_checks.h"
#include "vision/qwen3_5_vision_tower.h"

namespace fs::test {
namespace {

TowerFixture load_qwen3_5(const std::filesystem::path& shared) {
  TowerFixture f = open_tower(shared / "models" / "tiny-qwen3.5-vl");
  const auto ref = shared / "reference" / "tiny-qwen3.5-vl";
  const json cases = read_json_file(ref / "cases.json");
  for (const auto& im : cases["images"]) add_tower_case(f, im, im, ref);
  return f;
}

TEST(CudaVisionTowerQwen35, MatchesReferenceAndCpuTower) {
  FS_REQUIRE_GPU();
  FS_REQUIRE_SHARED(shared);
  TowerFixture f = load_qwen3_5(shared);
  ASSERT_EQ(f.config.kind, vision::VisionTowerKind::Qwen3_5);
  ASSERT_FALSE(f.images.empty());
  vision::Qwen35VisionTower cpu(f.config, f.checkpoint);
  expect_matches_reference_and_cpu(f, cpu, "CUDA Qwen3.5 tower");
}

TEST(CudaVisionTowerQwen35, WeightsOnHostGiveTheSameBitsAndPinnedMemoryIsAllocatedOnce) {
  FS_REQUIRE_GPU();
  FS_REQUIRE_SHARED(shared);
  TowerFixture f = load_qwen3_5(shared);
  vision::VisionEncoderStats rs, ss;
  ASSERT_NO_FATAL_FAILURE(expect_host_weights_same_bits_pinned_once(f, rs, ss));
}

}  // namespace
}  // namespace fs::test

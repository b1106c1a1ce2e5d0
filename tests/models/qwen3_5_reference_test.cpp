// The Qwen3.5 hybrid family on the CPU against transformers' float32 answers in ../shared/reference: the text
// model's logits, hidden states and greedy ids, and the text side of the vision-language export fed the reference
// tower's features and M-RoPE positions.
#include <gtest/gtest.h>

#include "core/files.h"
#include "model_harness.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

// Greedy ids of a reference case up to (not including) its first near-tie.
std::vector<int32_t> greedy_before_near_tie(const json& greedy) {
  std::vector<int32_t> want;
  for (const auto& g : greedy) {
    if (g["margin"].get<double>() < 1e-2) break;
    want.push_back(g["id"].get<int32_t>());
  }
  return want;
}

TEST(Qwen35Reference, LogitsHiddenStatesAndGreedyMatchTransformers) {
  FS_REQUIRE_SHARED(shared);
  auto ref_dir = shared / "reference/tiny-qwen3.5";
  json cases = read_json_file(ref_dir / "cases.json");
  ModelHarness h(shared / "models/tiny-qwen3.5");
  ASSERT_FALSE(cases["cases"].empty());
  for (const auto& c : cases["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto ids = c["ids"].get<std::vector<int32_t>>();
    auto logits = h.prefill(ids);
    EXPECT_LE(rel_l2(logits, read_f32(ref_dir / c["last_logits"]["file"].get<std::string>())), 1e-4);

    auto states_ref = read_f32(ref_dir / c["hidden_states"]["file"].get<std::string>());
    auto states = h.model->hidden_states(h.chunk(ids, 0), *h.pool);
    expect_layers_close(states, states_ref, ids.size() * size_t(h.config.hidden_size), 1e-4);

    auto want = greedy_before_near_tie(c["greedy"]);
    EXPECT_EQ(h.greedy(ids, int(want.size())), want);
  }
}

TEST(Qwen35Reference, VisionLanguageTextSideMatchesTransformersGivenTheTowerOutput) {
  FS_REQUIRE_SHARED(shared);
  auto ref_dir = shared / "reference/tiny-qwen3.5-vl";
  json ref = read_json_file(ref_dir / "cases.json");
  ModelHarness h(shared / "models/tiny-qwen3.5-vl");
  ASSERT_EQ(h.config.architecture, "Qwen3_5ForConditionalGeneration");
  ASSERT_FALSE(ref["prompts"].empty());
  for (const auto& p : ref["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    std::vector<float> features;
    for (const auto& img : ref["images"])
      if (p["name"].get<std::string>().find(img["file"].get<std::string>()) != std::string::npos)
        features = read_f32(ref_dir / img["tower_output"]["file"].get<std::string>());
    ASSERT_FALSE(features.empty());
    auto ids = p["ids"].get<std::vector<int32_t>>();
    auto thw = p["position_ids_thw"].get<std::vector<std::vector<int32_t>>>();
    std::vector<int32_t> positions;
    for (size_t i = 0; i < ids.size(); ++i)
      for (int axis = 0; axis < 3; ++axis) positions.push_back(thw[size_t(axis)][i]);
    SequenceChunk c = h.chunk(ids, 0);
    c.mrope_positions = positions;
    c.image_embeddings = features;
    auto logits = h.model->forward(std::span<const SequenceChunk>(&c, 1), *h.pool);
    EXPECT_LE(rel_l2(logits, read_f32(ref_dir / p["last_logits"]["file"].get<std::string>())), 1e-4);
  }
}

}  // namespace
}  // namespace fs::test

// The CPU forward against transformers' float32 answers in ../shared/reference.
#include <gtest/gtest.h>

#include "core/files.h"
#include "model_harness.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

class ReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTest, LogitsHiddenStatesAndGreedyMatchTransformers) {
  FS_REQUIRE_SHARED(shared);
  const std::string name = GetParam();
  auto ref_dir = shared / "reference" / name;
  json cases = read_json_file(ref_dir / "cases.json");
  ModelHarness h(shared / "models" / name);
  ASSERT_FALSE(cases["cases"].empty());
  for (const auto& c : cases["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto ids = c["ids"].get<std::vector<int32_t>>();
    auto expected = read_f32(ref_dir / c["last_logits"]["file"].get<std::string>());
    auto logits = h.prefill(ids);
    EXPECT_LE(rel_l2(logits, expected), 1e-4);

    auto states_ref = read_f32(ref_dir / c["hidden_states"]["file"].get<std::string>());
    auto states = h.model->hidden_states(SequenceChunk{ids, 0, h.pages, false}, *h.pool);
    expect_layers_close(states, states_ref, ids.size() * size_t(h.config.hidden_size), 1e-4);

    std::vector<int32_t> want;
    for (const auto& g : c["greedy"]) {
      want.push_back(g["id"].get<int32_t>());
      if (g["margin"].get<double>() < 1e-3) break;
    }
    auto got = h.greedy(ids, int(want.size()));
    EXPECT_EQ(got, want);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ReferenceTest, ::testing::Values("tiny-qwen3", "tiny-qwen2", "tiny-llama3"));

TEST(FortuneDemo, GreedyRepliesEqualReference) {
  FS_REQUIRE_SHARED(shared);
  json cases = read_json_file(shared / "reference/fortune-demo/cases.json");
  ModelHarness h(shared / "models/fortune-demo");
  for (const auto& c : cases["cases"]) {
    auto ids = c["ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> want;
    for (const auto& g : c["greedy"]) want.push_back(g["id"].get<int32_t>());
    EXPECT_EQ(h.greedy(ids, int(want.size())), want) << c["ask"];
  }
}

}  // namespace
}  // namespace fs::test

// Tree verification (--draft-tree W) never changes a bit: replies and logprobs with draft trees from fortune-draft and
// from n-grams equal the undrafted solo runs, greedy and seeded at temperature 0.8, alone and among 8 streams;
// rejected rows leave no pages behind and the prompt cache keeps no rejected token.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/files.h"
#include "engine/drafters/model_drafter.h"
#include "engine/drafters/ngram_drafter.h"
#include "engine_runner.h"
#include "forwarding_model.h"
#include "fortune_drafting.h"
#include "io/safetensors.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

// The CPU model as the engine sees it, with or without row parents; every call goes to the real model.
class RowParentsModel final : public ForwardingModel {
 public:
  RowParentsModel(Model& inner, bool parents) : ForwardingModel(inner), parents_(parents) {}
  bool supports_row_parents() const override { return parents_; }

 private:
  bool parents_;
};

class TreeDrafting : public FortuneDraftingTest {
 protected:
  // The three reference prompts, greedy and seeded at temperature 0.8, with logprobs; `repeated` → each prompt
  // after a pattern of its own tokens whose n-grams recur with different continuations.
  std::vector<GenerationRequest> requests(int max_tokens = 48, bool repeated = false) const {
    std::vector<GenerationRequest> reqs;
    for (float temperature : {0.0f, 0.8f})
      for (size_t i = 0; i < prompts.size(); ++i) {
        GenerationRequest r;
        const auto& p = prompts[i];
        r.prompt = p;
        for (size_t j = 0; repeated && j < 8; ++j) {
          r.prompt.insert(r.prompt.end(), p.end() - 8, p.end() - 4);
          r.prompt.push_back(p[j]);
        }
        r.max_tokens = max_tokens;
        r.eos_ids = config.eos_ids;
        r.sampling.temperature = temperature;
        r.sampling.seed = 4242 + i;
        r.sampling.logprobs = true;
        r.sampling.top_logprobs = 3;
        reqs.push_back(r);
      }
    return reqs;
  }

  std::vector<std::shared_ptr<Collected>> run(Model& target, const std::vector<GenerationRequest>& reqs,
                                              std::shared_ptr<Drafter> with, int parallel, int width,
                                              EngineOptions o = {}) {
    o.draft_tree = width;
    return run_drafting(target, reqs, std::move(with), parallel, o);
  }

  double drafted_per_window() const { return double(stats.drafted_tokens) / double(stats.draft_windows); }
};

TEST_F(TreeDrafting, DraftModelTreesEqualUndraftedAloneAndAmongEight) {
  RowParentsModel target(*model, true);
  const auto reqs = requests();
  for (int parallel : {1, 8}) {
    SCOPED_TRACE("parallel " + std::to_string(parallel));
    auto got = run(target, reqs, drafter, parallel, 3);
    expect_equal_to_solo(reqs, got);
    // Three choices per depth: windows carry more rows than a chain of 4 could.
    EXPECT_GT(drafted_per_window(), 4.0);
    EXPECT_GT(stats.accepted_tokens, 0u);
    EXPECT_EQ(stats.kv_pages_used, 0);
  }
}

TEST_F(TreeDrafting, NgramTreesEqualUndraftedAloneAndAmongEight) {
  RowParentsModel target(*model, true);
  auto reqs = requests();
  const auto repeated = requests(48, true);
  reqs.insert(reqs.end(), repeated.begin(), repeated.end());
  for (int parallel : {1, 8}) {
    SCOPED_TRACE("parallel " + std::to_string(parallel));
    auto got = run(target, reqs, std::make_shared<NgramDrafter>(), parallel, 4);
    std::printf("ngram trees: %llu windows, %.2f rows drafted and %.2f kept per window\n",
                (unsigned long long)stats.draft_windows, drafted_per_window(),
                double(stats.accepted_tokens) / double(stats.draft_windows));
    expect_equal_to_solo(reqs, got);
    // The patterned prompts' n-grams have several continuations: windows carry more rows than a chain of 4.
    EXPECT_GT(drafted_per_window(), 4.0);
    EXPECT_EQ(stats.kv_pages_used, 0);
  }
}

TEST_F(TreeDrafting, LimitsInsideATreeEndTheReplyWhereUndraftedDoes) {
  RowParentsModel target(*model, true);
  for (int max_tokens : {1, 2, 5, 7}) {
    SCOPED_TRACE("max_tokens " + std::to_string(max_tokens));
    const auto reqs = requests(max_tokens);
    expect_equal_to_solo(reqs, run(target, reqs, drafter, 4, 2));
  }
}

TEST_F(TreeDrafting, ThePromptCacheKeepsOnlyAcceptedRows) {
  RowParentsModel target(*model, true);
  EngineOptions o;
  o.parallel = 1;
  o.prompt_cache_pages = 64;
  o.kv_pages = 256;
  o.kv_page_tokens = 4;
  const auto reqs = requests();
  // Each reply's prompt and reply are cached after its tree windows; asking again resumes from the cached K/V.
  std::vector<GenerationRequest> again = reqs;
  for (size_t i = 0; i < reqs.size(); ++i) {
    for (const auto& t : run_solo(*model, reqs[i]))
      if (std::find(config.eos_ids.begin(), config.eos_ids.end(), t.id) == config.eos_ids.end())
        again[i].prompt.push_back(t.id);
    again[i].eos_ids.clear();
    again[i].max_tokens = 16;
  }
  std::vector<GenerationRequest> both = reqs;
  both.insert(both.end(), again.begin(), again.end());
  o.drafter = drafter;
  o.draft_tokens = 4;
  o.draft_tree = 3;
  Engine engine(target, o);
  EngineRunner runner(engine);
  std::vector<std::shared_ptr<Collected>> got;
  for (const auto& r : both) {
    got.push_back(runner.submit(r));
    runner.wait_all();
  }
  stats = engine.stats();
  EXPECT_GT(stats.prompt_cache.hits, 0u);
  EXPECT_EQ(stats.kv_pages_used, stats.prompt_cache.device_pages);
  expect_equal_to_solo(both, got);
}

TEST_F(TreeDrafting, AModelWithoutRowParentsDraftsChains) {
  RowParentsModel target(*model, false);
  const auto reqs = requests(24);
  auto got = run(target, reqs, drafter, 2, 3);
  expect_equal_to_solo(reqs, got);
  EXPECT_GT(stats.draft_windows, 0u);
  EXPECT_LE(drafted_per_window(), 4.0);
}

TEST(PromptLookupTree, DifferentContinuationsMergeIntoOneTree) {
  // "7 8" is followed by 1 2, by 1 3 and by 4 5; the latest match comes first.
  const std::vector<int32_t> tokens = {7, 8, 4, 5, 0, 7, 8, 1, 3, 0, 7, 8, 1, 2, 0, 7, 8};
  const auto found = prompt_lookups(tokens, 2, 2, 2, 4);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0], (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(found[1], (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(found[2], (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(prompt_lookup(tokens, 2, 2, 2), found[0]);
  const DraftTree t = merge_continuations(found);
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(t.parents, (std::vector<int32_t>{-1, 0, 0, -1, 3}));
}

TEST(ModelDrafterTree, TheGreedyBranchCarriesTheNextChoicesAsLeaves) {
  FS_REQUIRE_SHARED(shared);
  const auto dir = shared / "models/fortune-draft";
  const json cases = read_json_file(shared / "reference/fortune-demo/cases.json");
  const auto prompt = cases["cases"][0]["ids"].get<std::vector<int32_t>>();
  ModelDrafter chains(create_model(load_model_config(dir), Checkpoint::open(dir)), "fortune-draft", 64);
  ModelDrafter trees(create_model(load_model_config(dir), Checkpoint::open(dir)), "fortune-draft", 64);
  const DraftRequest chain_request{1, prompt, 4, 1}, tree_request{1, prompt, 4, 3};
  const auto chain = chains.propose(std::span<const DraftRequest>(&chain_request, 1))[0];
  const auto tree = trees.propose_trees(std::span<const DraftRequest>(&tree_request, 1))[0];
  ASSERT_EQ(chain.size(), 4u);
  ASSERT_EQ(tree.tokens.size(), 12u);
  for (size_t d = 0; d < 4; ++d) {
    SCOPED_TRACE("depth " + std::to_string(d));
    // The first node of each depth is the chain's guess; all three hang off the previous depth's guess.
    EXPECT_EQ(tree.tokens[3 * d], chain[d]);
    for (size_t j = 0; j < 3; ++j) EXPECT_EQ(tree.parents[3 * d + j], d == 0 ? -1 : int32_t(3 * (d - 1)));
    EXPECT_NE(tree.tokens[3 * d + 1], tree.tokens[3 * d]);
    EXPECT_NE(tree.tokens[3 * d + 2], tree.tokens[3 * d + 1]);
  }
}

}  // namespace
}  // namespace fs::test

// Speculative decoding never changes a bit: replies and logprobs with a draft model or n-gram drafting equal the
// undrafted solo runs, greedy and seeded, with penalties, stops and limits, alone and among 8 streams, under
// preemption; the drafter's acceptance is reported and a drafter of another tokenizer is refused.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <random>

#include "core/error.h"
#include "core/files.h"
#include "engine/drafters/load_drafter.h"
#include "engine/drafters/model_drafter.h"
#include "engine/drafters/ngram_drafter.h"
#include "engine_runner.h"
#include "fortune_drafting.h"
#include "io/safetensors.h"
#include "models/checkpoint_maker.h"
#include "models/kv_pool.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

struct Variant {
  const char* name;
  float temperature;   // 0 → greedy
  bool penalties;
};

class Speculative : public FortuneDraftingTest {
 protected:
  GenerationRequest request(const std::vector<int32_t>& prompt, const Variant& v, uint64_t seed,
                            int max_tokens = 64) const {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = max_tokens;
    r.eos_ids = config.eos_ids;
    r.sampling.temperature = v.temperature;
    r.sampling.seed = seed;
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 3;
    if (v.penalties) {
      r.sampling.repetition_penalty = 1.3f;
      r.sampling.presence_penalty = 0.4f;
      r.sampling.frequency_penalty = 0.3f;
    }
    return r;
  }

  // Every request run together in one engine with `drafter`, `parallel` streams at once.
  std::vector<std::shared_ptr<Collected>> run_drafted(const std::vector<GenerationRequest>& reqs,
                                                      std::shared_ptr<Drafter> with, int parallel,
                                                      EngineOptions o = {}) {
    return run_drafting(*model, reqs, std::move(with), parallel, o);
  }

  // Ten requests over the reference prompts: greedy and seeded at temperature 0.8, some with penalties.
  std::vector<GenerationRequest> mixed_requests() const {
    const Variant variants[] = {{"greedy", 0.0f, false}, {"seeded", 0.8f, false}, {"penalties", 0.8f, true}};
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < 10; ++i)
      reqs.push_back(request(prompts[size_t(i) % prompts.size()], variants[i % 3], 900 + uint64_t(i)));
    return reqs;
  }

  // Also: each reply stops for the reason its solo run did.
  void expect_equal_to_solo(const std::vector<GenerationRequest>& reqs,
                            const std::vector<std::shared_ptr<Collected>>& got) {
    FortuneDraftingTest::expect_equal_to_solo(reqs, got, [&](size_t i, const std::vector<SampledToken>& want) {
      EXPECT_EQ(got[i]->result.reason, want.size() < size_t(reqs[i].max_tokens) ? FinishReason::Stop
                                                                                : FinishReason::Length);
    });
  }
};

TEST_F(Speculative, DraftModelGreedyRepliesEqualTheReferenceAndAreAccepted) {
  const auto shared = shared_dir();
  const json reference = read_json_file(shared / "reference/fortune-demo/cases.json");
  const json& cases = reference["cases"];
  std::vector<GenerationRequest> reqs;
  for (const auto& p : prompts) reqs.push_back(request(p, {"greedy", 0.0f, false}, 1, 48));
  auto got = run_drafted(reqs, drafter, 1);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    std::vector<int32_t> want;  // the reference's greedy ids up to its first eos
    for (const auto& g : cases[i]["greedy"]) {
      const int32_t id = g["id"].get<int32_t>();
      if (std::find(config.eos_ids.begin(), config.eos_ids.end(), id) != config.eos_ids.end()) break;
      want.push_back(id);
    }
    std::vector<int32_t> ids;
    for (const auto& t : got[i]->tokens) ids.push_back(t.id);
    EXPECT_EQ(ids, want);
    EXPECT_GT(got[i]->result.drafted_tokens, 0);
  }
  EXPECT_GT(stats.accepted_tokens, 0u);
  EXPECT_LE(stats.accepted_tokens, stats.drafted_tokens);
  std::printf("fortune-draft acceptance on the reference prompts: %llu of %llu drafted (%.2f), %.2f kept per window\n",
              (unsigned long long)stats.accepted_tokens, (unsigned long long)stats.drafted_tokens,
              double(stats.accepted_tokens) / double(stats.drafted_tokens),
              double(stats.accepted_tokens) / double(stats.draft_windows));
  expect_equal_to_solo(reqs, got);
}

TEST_F(Speculative, DraftModelEqualsUndraftedAloneAndAmongEight) {
  const auto reqs = mixed_requests();
  for (int parallel : {1, 8}) {
    SCOPED_TRACE("parallel " + std::to_string(parallel));
    auto got = run_drafted(reqs, drafter, parallel);
    expect_equal_to_solo(reqs, got);
    EXPECT_GT(stats.accepted_tokens, 0u);
  }
}

TEST_F(Speculative, PrefillFirstDraftsOnlyInDecodeRoundsAndChangesNoBit) {
  const auto reqs = mixed_requests();
  EngineOptions o;
  o.prefill_first = true;
  o.prefill_chunk = 8;  // the prompts take several rounds, so decode rounds wait behind them
  auto got = run_drafted(reqs, drafter, 8, o);
  expect_equal_to_solo(reqs, got);
  EXPECT_GT(stats.accepted_tokens, 0u);
}

TEST_F(Speculative, ADrafterWithAnotherPaddingOfTheSameTokenizerDraftsAndChangesNoBit) {
  // Qwen2.5-0.5B pads its embedding to 151936 rows and Qwen2.5-7B to 152064 over one tokenizer: the tokenizer
  // decides. This drafter has 64 rows more than fortune-demo; a guess among them is cut from its tree.
  const auto shared = shared_dir();
  const auto dir = std::filesystem::temp_directory_path() / ("fs-padded-draft-" + std::to_string(::getpid()));
  json c = read_json_file(shared / "models/fortune-draft/config.json");
  c["vocab_size"] = c["vocab_size"].get<int>() + 64;
  MakeCheckpointOptions mo;
  mo.tokenizer_from = shared / "models/fortune-draft";
  make_checkpoint(c, dir, mo);
  auto target = load_model(shared / "models/fortune-demo", {}, "cpu");
  const auto padded = load_drafter(dir.string(), *target, 8, 512);
  const auto reqs = mixed_requests();
  auto got = run_drafted(reqs, padded, 8);
  expect_equal_to_solo(reqs, got);
  EXPECT_GT(stats.drafted_tokens, 0u);
  std::filesystem::remove_all(dir);
}

TEST_F(Speculative, NgramEqualsUndraftedAloneAndAmongEight) {
  const auto reqs = mixed_requests();
  for (int parallel : {1, 8}) {
    SCOPED_TRACE("parallel " + std::to_string(parallel));
    auto got = run_drafted(reqs, std::make_shared<NgramDrafter>(), parallel);
    expect_equal_to_solo(reqs, got);
    EXPECT_GT(stats.drafted_tokens, 0u);
  }
}

// Passes proposals through from another drafter and keeps, per call, the rows the drafting streams ask for.
class RowCountingDrafter final : public Drafter {
 public:
  explicit RowCountingDrafter(std::shared_ptr<Drafter> inner) : inner_(std::move(inner)) {}
  const char* name() const override { return inner_->name(); }
  std::vector<std::vector<int32_t>> propose(std::span<const DraftRequest> requests) override {
    int rows = 0;
    for (const DraftRequest& r : requests) rows += 1 + r.max_tokens;
    most_rows = std::max(most_rows, rows);
    return inner_->propose(requests);
  }
  void forget(uint64_t stream) override { inner_->forget(stream); }
  int most_rows = 0;  // the most rows (pending ones and drafts) of one call's streams

 private:
  std::shared_ptr<Drafter> inner_;
};

// A round holds at most draft_round_rows rows once drafts are added: with 4 streams decoding a cap of 6 leaves 2
// drafted rows, where 4 × (1 + 4) would be asked without it; replies stay the undrafted ones.
TEST_F(Speculative, DraftRoundRowsCapsTheRowsARoundDrafts) {
  const auto reqs = mixed_requests();
  for (int cap : {0, 6}) {
    SCOPED_TRACE("draft_round_rows " + std::to_string(cap));
    auto counting = std::make_shared<RowCountingDrafter>(drafter);
    EngineOptions o;
    o.draft_round_rows = cap;
    auto got = run_drafted(reqs, counting, 4, o);
    expect_equal_to_solo(reqs, got);
    EXPECT_GT(stats.drafted_tokens, 0u);
    if (cap > 0) EXPECT_LE(counting->most_rows, cap);
    else EXPECT_EQ(counting->most_rows, 4 * (1 + 4));
  }
}

// A tree's nodes count as rows: one stream under a cap of 4 verifies at most 3 drafted nodes per window, where trees
// of width 2 and depth 4 hold up to 8.
TEST_F(Speculative, DraftRoundRowsCountATreesNodes) {
  const auto reqs = mixed_requests();
  for (int cap : {0, 4}) {
    SCOPED_TRACE("draft_round_rows " + std::to_string(cap));
    EngineOptions o;
    o.draft_round_rows = cap;
    o.draft_tree = 2;
    auto got = run_drafted(reqs, drafter, 1, o);
    expect_equal_to_solo(reqs, got);
    ASSERT_GT(stats.draft_windows, 0u);
    if (cap > 0) EXPECT_LE(stats.drafted_tokens, 3 * stats.draft_windows);
    else EXPECT_GT(stats.drafted_tokens, 3 * stats.draft_windows);
  }
}

TEST_F(Speculative, StopsAndLimitsInsideAWindowEndTheReplyWhereUndraftedDoes) {
  for (int max_tokens : {1, 2, 5, 7}) {
    SCOPED_TRACE("max_tokens " + std::to_string(max_tokens));
    std::vector<GenerationRequest> reqs;
    for (const auto& p : prompts) reqs.push_back(request(p, {"greedy", 0.0f, false}, 1, max_tokens));
    expect_equal_to_solo(reqs, run_drafted(reqs, drafter, 4));
  }
  // A stop (on_token refusing, as a stop string does) at each of the solo reply's first tokens.
  const GenerationRequest base = request(prompts[0], {"greedy", 0.0f, false}, 1, 40);
  const auto solo = run_solo(*model, base);
  ASSERT_GT(solo.size(), 12u);
  for (size_t stop_at : {size_t(0), size_t(3), size_t(6), size_t(11)}) {
    SCOPED_TRACE("stop at " + std::to_string(stop_at));
    GenerationRequest r = base;
    std::vector<SampledToken> seen;
    std::promise<GenerationResult> done;
    r.on_token = [&](const SampledToken& t) {
      seen.push_back(t);
      return seen.size() <= stop_at;
    };
    r.on_done = [&](const GenerationResult& res) { done.set_value(res); };
    EngineOptions o;
    o.drafter = drafter;
    Engine engine(*model, o);
    engine.submit(std::move(r));
    EXPECT_EQ(done.get_future().get().reason, FinishReason::Stop);
    EXPECT_TRUE(same_bits(seen, std::vector<SampledToken>(solo.begin(), solo.begin() + long(stop_at) + 1)));
  }
}

TEST_F(Speculative, DraftFalseIsHonoured) {
  GenerationRequest off = request(prompts[0], {"greedy", 0.0f, false}, 1, 32);
  off.allow_draft = false;
  GenerationRequest on = off;
  on.allow_draft = true;
  auto got = run_drafted({off, on}, drafter, 2);
  EXPECT_EQ(got[0]->result.drafted_tokens, 0);
  EXPECT_GT(got[1]->result.drafted_tokens, 0);
  EXPECT_TRUE(same_bits(got[0]->tokens, got[1]->tokens));
}

TEST_F(Speculative, PreemptionDuringDraftingStaysExact) {
  const auto reqs = mixed_requests();
  EngineOptions o;
  o.context = 256;
  o.prefill_chunk = 16;
  o.round_tokens = 64;
  o.kv_pages = 16;
  o.prompt_cache_pages = 4;
  auto got = run_drafted(reqs, drafter, 8, o);
  EXPECT_GT(stats.preemptions, 0u);
  EXPECT_GT(stats.accepted_tokens, 0u);
  expect_equal_to_solo(reqs, got);
  EXPECT_EQ(stats.kv_pages_used, stats.prompt_cache.device_pages);
}

TEST(SpeculativeDrafter, ADrafterOfAnotherTokenizerIsRefusedByName) {
  FS_REQUIRE_SHARED(shared);
  auto target = load_model(shared / "models/fortune-demo", {}, "cpu");
  try {
    load_drafter((shared / "models/tiny-qwen3").string(), *target, 1, 64);
    FAIL() << "tiny-qwen3 was accepted as a drafter for fortune-demo";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("drafter tiny-qwen3 does not share the tokenizer of fortune-demo"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(load_drafter((shared / "models/fortune-draft").string(), *target, 1, 64));
}

TEST(SpeculativeDrafter, AHostDrafterCountsItsPoolAsRamToComeAndNothingOnADevice) {
  FS_REQUIRE_SHARED(shared);
  auto target = load_model(shared / "models/fortune-demo", {}, "cpu");
  const int streams = 3, context = 100;
  const auto drafter = load_drafter((shared / "models/fortune-draft").string(), *target, streams, context);
  const ModelConfig draft = load_model_config(shared / "models/fortune-draft");
  const size_t page = KvPool::bytes_per_page(draft.num_layers, draft.num_kv_heads, draft.head_dim, 16);
  const DrafterMemory m = drafter->memory();
  EXPECT_EQ(m.host_to_come, size_t(streams * ((context + 15) / 16) + streams) * page);
  EXPECT_EQ(m.device_resident, 0u);
  EXPECT_EQ(load_drafter("ngram", *target, streams, context)->memory().host_to_come, 0u);
}

TEST(SpeculativeDrafter, ItsPoolHoldsEveryWholeContextWhenItsShareFitsElseWhatTheShareHolds) {
  // A position: 100 bytes of the drafter's K/V beside 300 of the target's, so the drafter's share is a quarter.
  const int streams = 2, context = 64;
  const int whole = streams * (context / 16) + streams;
  EXPECT_EQ(drafter_pool_pages(100, 300, streams, context, size_t(1) << 20), whole);
  EXPECT_EQ(drafter_pool_pages(100, 300, streams, context, 4 * 100 * 7), 7);  // a quarter of it holds 7 pages
  EXPECT_EQ(drafter_pool_pages(100, 300, streams, context, 0), streams);     // never below a page per stream
  EXPECT_EQ(drafter_pool_pages(100, 300, 3, 100000, size_t(1) << 40), 3 * 6250 + 3);
}

TEST(SpeculativeDrafter, ATokenPastTheDraftersEmbeddingLeavesOnlyItsStreamUndrafted) {
  FS_REQUIRE_SHARED(shared);
  const auto dir = shared / "models/fortune-draft";
  const ModelConfig c = load_model_config(dir);
  ModelDrafter drafter(create_model(c, Checkpoint::open(dir)), "fortune-draft", 64);
  const std::vector<int32_t> fine = {1, 100, 200, 300}, outside = {1, 100, c.vocab_size + 5, 300};
  const std::vector<DraftRequest> requests = {{1, fine, 3, 1}, {2, outside, 3, 1}};
  const auto guesses = drafter.propose(requests);
  ASSERT_EQ(guesses.size(), 2u);
  EXPECT_EQ(guesses[0].size(), 3u);
  EXPECT_TRUE(guesses[1].empty());
}

TEST(SpeculativeDrafter, TopIdsAreTheHighestLogitsWithTiesToTheLowerId) {
  std::mt19937 rng(5);
  for (int vocab : {1, 7, 64, 1000, 4099}) {
    for (int count = 1; count <= 8; ++count) {
      // Few distinct values, so many logits tie.
      std::vector<float> row(static_cast<size_t>(vocab));
      for (float& v : row) v = float(int(rng() % 9)) - 4.0f;
      std::vector<int32_t> want(static_cast<size_t>(vocab));
      for (int32_t i = 0; i < vocab; ++i) want[size_t(i)] = i;
      std::stable_sort(want.begin(), want.end(), [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)]; });
      want.resize(size_t(std::min(count, vocab)));
      EXPECT_EQ(top_ids(row, count), want) << "vocab " << vocab << ", count " << count;
    }
  }
}

TEST(PromptLookup, ProposesWhatFollowedTheLatestEarlierMatch) {
  const std::vector<int32_t> a = {5, 6, 7, 8, 9}, b = {5, 6, 1, 2, 3};
  std::vector<int32_t> tokens = a;
  tokens.insert(tokens.end(), b.begin(), b.end());
  tokens.insert(tokens.end(), {5, 6});
  // "5 6" occurs at 0 and 5; the latest (5) is followed by b's tail.
  EXPECT_EQ(prompt_lookup(tokens, 2, 4, 3), std::vector<int32_t>(b.begin() + 2, b.end()));
  EXPECT_EQ(prompt_lookup(tokens, 2, 4, 1), std::vector<int32_t>(b.begin() + 2, b.begin() + 3));
  EXPECT_TRUE(prompt_lookup(tokens, 3, 4, 3).empty());
  EXPECT_TRUE(prompt_lookup(tokens, 2, 4, 0).empty());
}

}  // namespace
}  // namespace fs::test

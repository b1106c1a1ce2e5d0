// Speculative decoding on a hybrid model (tiny-qwen3.5): a verify window runs its Gated DeltaNet state through every
// drafted row, and the engine rolls the stream's slot back to the last kept row. Replies equal their undrafted solo
// runs bit for bit, with the prompt cache taking state snapshots inside windows and streams resuming from them.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/drafters/model_drafter.h"
#include "engine_runner.h"
#include "io/safetensors.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

// Proposes each stream's true continuation (its undrafted run) with one guess made wrong at a depth that cycles
// through 0..k, so windows keep every possible number of rows, all of them included.
class ScriptedDrafter final : public Drafter {
 public:
  ScriptedDrafter(std::vector<std::vector<int32_t>> sequences, int32_t vocab)
      : sequences_(std::move(sequences)), vocab_(vocab) {}
  const char* name() const override { return "scripted"; }
  std::vector<std::vector<int32_t>> propose(std::span<const DraftRequest> requests) override {
    std::vector<std::vector<int32_t>> out;
    for (const DraftRequest& r : requests) {
      std::vector<int32_t> guess;
      for (const auto& seq : sequences_) {
        if (seq.size() <= r.tokens.size() || !std::equal(r.tokens.begin(), r.tokens.end(), seq.begin())) continue;
        const size_t n = std::min(seq.size() - r.tokens.size(), size_t(r.max_tokens));
        guess.assign(seq.begin() + long(r.tokens.size()), seq.begin() + long(r.tokens.size() + n));
        const size_t wrong = calls_++ % size_t(r.max_tokens + 1);
        if (wrong < guess.size()) guess[wrong] = (guess[wrong] + 1) % vocab_;
        break;
      }
      out.push_back(std::move(guess));
    }
    return out;
  }

 private:
  std::vector<std::vector<int32_t>> sequences_;
  int32_t vocab_;
  size_t calls_ = 0;
};

class Qwen35Drafting : public TinyQwen35Test {
 protected:
  // Random prompts of 5 .. 68 tokens; greedy or seeded.
  GenerationRequest request(int i, int max_tokens) const {
    std::mt19937 rng(uint32_t(300 + i));
    std::uniform_int_distribution<int32_t> token(0, config.vocab_size - 1);
    GenerationRequest r;
    r.prompt.resize(size_t(5 + 9 * i));
    for (auto& t : r.prompt) t = token(rng);
    r.max_tokens = max_tokens - i % 3;  // limits that end inside windows
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 3;
    r.sampling.temperature = i % 2 ? 0.8f : 0.0f;
    r.sampling.seed = uint64_t(11 + i);
    return r;
  }

  // `o` for `parallel` streams of 160 positions drafting up to 4 tokens with `drafter`.
  static EngineOptions drafting(int parallel, std::shared_ptr<Drafter> drafter, EngineOptions o = {}) {
    o.parallel = parallel;
    o.context = 160;
    o.drafter = std::move(drafter);
    o.draft_tokens = 4;
    return o;
  }

  // Runs every request in one engine with `drafter` at `parallel` streams; checks each against its solo run.
  void expect_solo_bits(const std::vector<GenerationRequest>& reqs, std::shared_ptr<Drafter> drafter, int parallel,
                        EngineOptions o = {}) {
    Engine engine(*model, drafting(parallel, std::move(drafter), o));
    EngineRunner runner(engine);
    std::vector<std::shared_ptr<Collected>> got;
    for (const auto& r : reqs) got.push_back(runner.submit(r));
    runner.wait_all();
    for (size_t i = 0; i < reqs.size(); ++i) {
      SCOPED_TRACE("request " + std::to_string(i) + " at " + std::to_string(parallel) + " streams");
      EXPECT_TRUE(same_bits(got[i]->tokens, solo[i]));
      EXPECT_EQ(got[i]->result.reason, FinishReason::Length);
    }
    stats = engine.stats();
    EXPECT_EQ(stats.kv_pages_used, stats.prompt_cache.device_pages);
  }

  void run_solos(const std::vector<GenerationRequest>& reqs) {
    solo.clear();
    for (const auto& r : reqs) solo.push_back(run_solo(*model, r));
  }

  // Prompt then solo reply ids of each request.
  std::vector<std::vector<int32_t>> solo_sequences(const std::vector<GenerationRequest>& reqs) const {
    std::vector<std::vector<int32_t>> seqs;
    for (size_t i = 0; i < reqs.size(); ++i) {
      seqs.push_back(reqs[i].prompt);
      for (const auto& t : solo[i]) seqs.back().push_back(t.id);
    }
    return seqs;
  }

  std::vector<std::vector<SampledToken>> solo;
  EngineStats stats;
};

TEST_F(Qwen35Drafting, WindowsKeepingAnyNumberOfRowsEqualUndraftedRuns) {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 8; ++i) reqs.push_back(request(i, 23));
  run_solos(reqs);
  for (int parallel : {1, 8}) {
    expect_solo_bits(reqs, std::make_shared<ScriptedDrafter>(solo_sequences(reqs), config.vocab_size), parallel);
    EXPECT_GT(stats.accepted_tokens, 0u);
    EXPECT_GT(stats.drafted_tokens, stats.accepted_tokens);  // rows were rolled back
  }
}

TEST_F(Qwen35Drafting, PromptCacheKeepsOnlyKeptRowsAndResumedStreamsEqualFreshOnes) {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(request(i, 30));
  run_solos(reqs);
  const auto sequences = solo_sequences(reqs);
  EngineOptions o;
  o.kv_page_tokens = 4;
  o.prompt_cache_pages = 4096;
  o.prompt_cache_state_stride = 4;  // snapshots every page: some fall inside windows, some on rejected rows
  Engine engine(*model, drafting(3, std::make_shared<ScriptedDrafter>(sequences, config.vocab_size), o));
  EngineRunner runner(engine);
  std::vector<std::shared_ptr<Collected>> got;
  for (const auto& r : reqs) got.push_back(runner.submit(r));
  runner.wait_all();
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_TRUE(same_bits(got[i]->tokens, solo[i])) << "request " << i;
  const EngineStats first = engine.stats();
  EXPECT_GT(first.accepted_tokens, 0u);
  EXPECT_GT(first.drafted_tokens, first.accepted_tokens);
  // Follow-ups whose prompts end at many points of the drafted replies resume from the snapshots the windows left:
  // a state kept for a rejected row would change their bits.
  for (size_t i = 0; i < reqs.size(); ++i)
    for (size_t extra : {3, 8, 13, 19, 24}) {
      GenerationRequest next = reqs[i];
      next.prompt.assign(sequences[i].begin(), sequences[i].begin() + long(reqs[i].prompt.size() + extra));
      next.max_tokens = 4;
      const auto want = run_solo(*model, next);
      auto c = runner.submit(next);
      runner.wait_all();
      SCOPED_TRACE("request " + std::to_string(i) + " + " + std::to_string(extra) + " reply tokens");
      EXPECT_EQ(c->result.cached_tokens, int(next.prompt.size() - 1) / 4 * 4);  // the deepest snapshot
      EXPECT_TRUE(same_bits(c->tokens, want));
    }
}

// A real draft model: tiny-qwen3 shares tiny-qwen3.5's tokenizer and has attention layers only. Its guesses are
// mostly rejected, so nearly every window rolls the state back.
TEST_F(Qwen35Drafting, AnAttentionDrafterEqualsUndraftedRunsAndTreesFallBackToChains) {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 8; ++i) reqs.push_back(request(i, 24));
  run_solos(reqs);
  const auto qwen3 = shared_dir() / "models/tiny-qwen3";
  auto drafter = std::make_shared<ModelDrafter>(create_model(load_model_config(qwen3), Checkpoint::open(qwen3)),
                                                "tiny-qwen3", 256);
  for (int tree : {1, 3}) {
    EngineOptions o;
    o.draft_tree = tree;  // the CPU runner has no row parents for recurrent layers: trees draft chains
    expect_solo_bits(reqs, drafter, 8, o);
    EXPECT_GT(stats.drafted_tokens, 0u);
  }
}

// A pool of exactly one stream's context, shared with the prompt cache: the cache's own copy of a page the stream
// also holds (an ancestor of the stream's shared pages, so never evictable) gives way to the stream's page when the
// stream's prefix goes into the cache, so the last stream reaches the end of its context instead of stalling.
TEST_F(Qwen35Drafting, ALoneStreamNeverWaitsOnACachedCopyOfItsOwnPage) {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(request(i, 30));
  run_solos(reqs);
  EngineOptions o;
  o.kv_page_tokens = 4;
  o.kv_pages = 16;  // 64 positions a stream: the last two requests end there
  o.prompt_cache_pages = 64;
  o.prompt_cache_host_pages = 32;
  o.prompt_cache_state_stride = 4;
  Engine engine(*model, drafting(2, std::make_shared<ScriptedDrafter>(solo_sequences(reqs), config.vocab_size), o));
  EngineRunner runner(engine);
  std::vector<std::shared_ptr<Collected>> got;
  for (const auto& r : reqs) got.push_back(runner.submit(r));
  runner.wait_all();
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(got[i]->result.reason, FinishReason::Length);
    const size_t n = std::min(got[i]->tokens.size(), solo[i].size());
    EXPECT_EQ(n, std::min(solo[i].size(), size_t(64) - reqs[i].prompt.size()));
    EXPECT_TRUE(same_bits(std::vector<SampledToken>(got[i]->tokens.begin(), got[i]->tokens.begin() + long(n)),
                          std::vector<SampledToken>(solo[i].begin(), solo[i].begin() + long(n))));
  }
  const EngineStats st = engine.stats();
  EXPECT_EQ(st.kv_pages_used, st.prompt_cache.device_pages);
}

}  // namespace
}  // namespace fs::test

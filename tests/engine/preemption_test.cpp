// A KV pool too small for all streams at once: streams are admitted by the pages they use, the youngest is
// preempted when the pool runs dry, and every reply is bit-identical to its solo run; the pool also bounds one
// stream's prompt (refused at submit) and reply (Length).
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "engine_runner.h"

namespace fs::test {
namespace {

GenerationRequest request(std::vector<int32_t> prompt, int max_tokens, bool seeded, uint64_t seed) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 3;
  r.sampling.temperature = seeded ? 0.9f : 0.0f;
  if (seeded) r.sampling.seed = seed;
  return r;
}

// Random prompts whose first tokens differ, so no two share a cached prefix.
std::vector<std::vector<int32_t>> prompts(int count, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  std::uniform_int_distribution<int> length(20, 50);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(length(rng)));
    for (auto& t : p) t = token(rng);
    p[0] = int32_t(i);
    out.push_back(std::move(p));
  }
  return out;
}

struct Case {
  bool seeded;
  bool prompt_cache;
};

class Preemption : public FortuneDemoTest, public ::testing::WithParamInterface<Case> {};

TEST_P(Preemption, EveryReplyEqualsItsSoloRunAndThePoolIsWhole) {
  const auto [seeded, with_cache] = GetParam();
  constexpr int kStreams = 8, kMaxTokens = 40, kPoolPages = 14;
  std::vector<GenerationRequest> reqs;
  int pages_needed = 0;
  for (const auto& p : prompts(kStreams, config.vocab_size, seeded ? 3 : 4)) {
    reqs.push_back(request(p, kMaxTokens, seeded, 500 + reqs.size()));
    pages_needed += (int(p.size()) + kMaxTokens + 15) / 16;
  }
  ASSERT_GE(pages_needed, 2 * kPoolPages);
  std::vector<std::vector<SampledToken>> want;
  for (const auto& r : reqs) want.push_back(run_solo(*model, r));

  EngineOptions o;
  o.parallel = kStreams;
  o.context = 256;
  o.prefill_chunk = 16;
  o.round_tokens = 48;
  o.kv_pages = kPoolPages;
  o.prompt_cache_pages = with_cache ? 6 : 0;
  Engine engine(*model, o);
  EngineRunner runner(engine);
  std::vector<std::shared_ptr<Collected>> got;
  for (const auto& r : reqs) got.push_back(runner.submit(r));
  runner.wait_all();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_TRUE(same_bits(got[size_t(i)]->tokens, want[size_t(i)]));
    EXPECT_EQ(got[size_t(i)]->result.reason, FinishReason::Length);
    EXPECT_EQ(got[size_t(i)]->result.completion_tokens, kMaxTokens);
    EXPECT_EQ(got[size_t(i)]->result.cached_tokens, 0);  // recomputing its own prefix is no prompt-cache hit
  }
  const EngineStats s = engine.stats();
  EXPECT_GT(s.preemptions, 0u);
  EXPECT_EQ(s.kv_pages_total, kPoolPages);
  EXPECT_EQ(s.kv_pages_used, s.prompt_cache.device_pages);
  if (with_cache) {
    EXPECT_EQ(s.prompt_cache.lookups, uint64_t(kStreams));
    EXPECT_EQ(s.prompt_cache.hits, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(GreedySeededWithAndWithoutCache, Preemption,
                         ::testing::Values(Case{false, false}, Case{true, false}, Case{false, true},
                                           Case{true, true}),
                         [](const auto& info) {
                           return std::string(info.param.seeded ? "Seeded" : "Greedy") +
                                  (info.param.prompt_cache ? "WithCache" : "NoCache");
                         });

// A stream preempted for want of pages goes back to the queue and is not admitted again until all its positions so
// far fit beside the running stream's reserve: admitted for one chunk, it would recompute part of its prefix only to
// be preempted again, over and over while the other stream grows.
TEST_F(FortuneDemoTest, APreemptedStreamWaitsUntilItsWholePrefixFits) {
  const auto p = prompts(2, config.vocab_size, 12);
  const GenerationRequest a = request(std::vector<int32_t>(p[0].begin(), p[0].begin() + 20), 60, false, 0);
  const GenerationRequest b = request(std::vector<int32_t>(p[1].begin(), p[1].begin() + 20), 60, true, 7);
  EngineOptions o;
  o.parallel = 2;
  o.context = 256;
  o.prefill_chunk = 16;
  o.round_tokens = 48;
  o.kv_pages = 8;  // each stream ends at 80 positions (5 pages): b is preempted on the way
  Engine engine(*model, o);
  EngineRunner runner(engine);
  auto got_a = runner.submit(a);
  auto got_b = runner.submit(b);
  runner.wait_all();
  EXPECT_TRUE(same_bits(got_a->tokens, run_solo(*model, a)));
  EXPECT_TRUE(same_bits(got_b->tokens, run_solo(*model, b)));
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.preemptions, 1u);
  EXPECT_EQ(s.kv_pages_used, 0);
}

class PoolBound : public FortuneDemoTest {
 protected:
  EngineOptions four_pages() {
    EngineOptions o;
    o.context = 256;
    o.kv_pages = 4;
    return o;
  }
};

TEST_F(PoolBound, APromptTheWholePoolCannotHoldIsRefusedWithTheNumbers) {
  Engine e(*model, four_pages());
  const auto p = prompts(1, config.vocab_size, 9)[0];
  std::vector<int32_t> too_long(64, p[0]);
  try {
    e.submit(request(too_long, 4, false, 0));
    FAIL() << "a 64-token prompt was queued for a pool of 64 positions";
  } catch (const Error& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("64 tokens"), std::string::npos) << m;
    EXPECT_NE(m.find("4 pages of 16 positions"), std::string::npos) << m;
  }
  EXPECT_EQ(e.stats().queued, 0);
  EngineRunner run(e);
  auto fits = run.submit(request(std::vector<int32_t>(63, p[0]), 4, false, 0));
  run.wait_all();
  EXPECT_EQ(fits->result.reason, FinishReason::Length);
  EXPECT_EQ(fits->tokens.size(), 1u);  // 64 positions reached
}

TEST_F(PoolBound, AReplyOutgrowingTheWholePoolEndsWithLengthAsItsSoloRunBegins) {
  const auto p = prompts(1, config.vocab_size, 10)[0];
  auto req = request(std::vector<int32_t>(p.begin(), p.begin() + 20), 100, true, 77);
  Engine e(*model, four_pages());
  EngineRunner run(e);
  auto c = run.submit(req);
  run.wait_all();
  EXPECT_EQ(c->result.reason, FinishReason::Length);
  EXPECT_EQ(c->result.completion_tokens, 64 - 20);
  auto want = run_solo(*model, req);
  want.resize(size_t(64 - 20));
  EXPECT_TRUE(same_bits(c->tokens, want));
  EXPECT_EQ(e.stats().kv_pages_used, 0);
}

}  // namespace
}  // namespace fs::test

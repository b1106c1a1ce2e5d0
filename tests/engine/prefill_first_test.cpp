// EngineOptions::prefill_first: no round mixes decode rows with prompt rows, the streams' replies are their solo
// runs' bits, and under a pool too small for all of them every stream still finishes.
#include <gtest/gtest.h>

#include <mutex>
#include <random>
#include <vector>

#include "engine_runner.h"

namespace fs::test {
namespace {

// Request i: a prompt of 7 + 13·i random ids, greedy for even i, seeded sampling for odd i, logprobs on.
GenerationRequest burst_request(const ModelConfig& config, int i, int max_tokens) {
  std::mt19937 rng(uint32_t(300 + i));
  std::uniform_int_distribution<int32_t> token(0, config.vocab_size - 1);
  GenerationRequest r;
  r.prompt.resize(size_t(7 + 13 * i));
  for (auto& t : r.prompt) t = token(rng);
  r.max_tokens = max_tokens;
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 2;
  r.sampling.temperature = i % 2 ? 0.9f : 0.0f;
  r.sampling.seed = uint64_t(11 + i);
  return r;
}

// Five streams at once in rounds of 24 rows and prompt chunks of 16.
EngineOptions burst_options(bool prefill_first) {
  EngineOptions o;
  o.parallel = 5;
  o.context = 160;
  o.prefill_chunk = 16;
  o.round_tokens = 24;
  o.prefill_first = prefill_first;
  return o;
}

struct BurstRun {
  std::vector<RoundRecord> rounds;
  std::vector<std::shared_ptr<Collected>> replies;
};

// The five streams submitted at once, each round recorded.
BurstRun run_burst(Model& model, const ModelConfig& config, bool prefill_first) {
  BurstRun out;
  std::mutex mu;
  EngineOptions o = burst_options(prefill_first);
  o.on_round = [&](const RoundRecord& r) {
    std::lock_guard lock(mu);
    out.rounds.push_back(r);
  };
  Engine engine(model, o);
  EngineRunner runner(engine);
  for (int i = 0; i < 5; ++i) out.replies.push_back(runner.submit(burst_request(config, i, 12)));
  runner.wait_all();
  std::lock_guard lock(mu);
  return out;
}

int mixed_rounds(const BurstRun& run) {
  int mixed = 0;
  for (const RoundRecord& r : run.rounds) mixed += r.decode_rows > 0 && r.prompt_rows > 0;
  return mixed;
}

void expect_prefill_first(Model& model, const ModelConfig& config) {
  std::vector<std::vector<SampledToken>> solo;
  for (int i = 0; i < 5; ++i) solo.push_back(run_solo(model, burst_request(config, i, 12)));
  const BurstRun held = run_burst(model, config, true);
  EXPECT_EQ(mixed_rounds(held), 0);
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE("stream " + std::to_string(i));
    ASSERT_EQ(held.replies[size_t(i)]->result.reason, FinishReason::Length);
    EXPECT_TRUE(same_bits(held.replies[size_t(i)]->tokens, solo[size_t(i)]));
  }
  // The default order mixes them on the same burst (the short prompts decode while the long ones prefill).
  const BurstRun mixed = run_burst(model, config, false);
  EXPECT_GT(mixed_rounds(mixed), 0);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(same_bits(mixed.replies[size_t(i)]->tokens, solo[size_t(i)])) << i;
}

// Under a pool of 14 pages (224 positions) for five streams of up to 79 positions, streams are preempted while the
// decode rows wait: every stream still finishes, with its solo bits.
void expect_prefill_first_under_a_tight_pool(Model& model, const ModelConfig& config) {
  EngineOptions o = burst_options(true);
  o.kv_pages = 14;
  Engine engine(model, o);
  EngineRunner runner(engine);
  std::vector<std::shared_ptr<Collected>> got;
  for (int i = 0; i < 5; ++i) got.push_back(runner.submit(burst_request(config, i, 20)));
  runner.wait_all();
  EXPECT_GT(engine.stats().preemptions, 0u);
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE("stream " + std::to_string(i));
    ASSERT_EQ(got[size_t(i)]->result.reason, FinishReason::Length) << got[size_t(i)]->result.error;
    EXPECT_TRUE(same_bits(got[size_t(i)]->tokens, run_solo(model, burst_request(config, i, 20))));
  }
}

TEST_F(FortuneDemoTest, PrefillFirstRoundsNeverMixDecodeAndPromptRowsAndKeepTheBits) {
  expect_prefill_first(*model, config);
}

TEST_F(TinyQwen35Test, PrefillFirstRoundsNeverMixDecodeAndPromptRowsAndKeepTheBits) {
  expect_prefill_first(*model, config);
}

TEST_F(FortuneDemoTest, PrefillFirstUnderATightPoolFinishesEveryStreamWithItsSoloBits) {
  expect_prefill_first_under_a_tight_pool(*model, config);
}

TEST_F(TinyQwen35Test, PrefillFirstUnderATightPoolFinishesEveryStreamWithItsSoloBits) {
  expect_prefill_first_under_a_tight_pool(*model, config);
}

}  // namespace
}  // namespace fs::test

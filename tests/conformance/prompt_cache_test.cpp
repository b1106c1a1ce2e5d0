// (5) A request resumed from the prompt cache == the same request fresh with the cache off, bit for bit: a shared
// prefix ending inside a page and across page edges, and a second turn that extends the first turn's reply.
#include <gtest/gtest.h>

#include "conformance.h"
#include "engine/engine_runner.h"
#include "engine/state_snapshots.h"
#include "random_tokens.h"

namespace fs::test {
namespace {

class PromptCacheResume : public Conformance {
 protected:
  GenerationRequest request(std::vector<int32_t> prompt, bool seeded) const {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = 6;
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 3;
    r.sampling.temperature = seeded ? 0.8f : 0.0f;
    r.sampling.seed = 42;
    return r;
  }

  static EngineOptions options(int cache_pages) {
    EngineOptions o;
    o.parallel = 2;
    o.context = 160;
    o.prefill_chunk = 24;
    o.round_tokens = 64;
    o.prompt_cache_pages = cache_pages;
    o.prompt_cache_state_stride = 16;
    return o;
  }

  // The positions a cached prefix of `n` resumes from (recurrent models resume at their last state snapshot).
  int resumable(int n) const {
    const int stride = state_snapshot_stride(options(64), model->memory_spec());
    return stride ? n / stride * stride : n;
  }

  // The request run alone with the cache off, on a second instance of the model: a device backend keeps one
  // engine's K/V at a time, and the engine under test still holds its cache.
  std::vector<SampledToken> fresh(const GenerationRequest& r) {
    if (!fresh_model) fresh_model = create_instance_model(GetParam(), config, checkpoint);
    return run_solo(*fresh_model, r, options(0));
  }

  std::unique_ptr<Model> fresh_model;

  std::vector<int32_t> tokens(int n, uint32_t seed) const { return random_tokens(n, seed, config.vocab_size); }

  static std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
};

TEST_P(PromptCacheResume, SharedPrefixResumesAsFresh) {
  for (int shared_len : {5, 16, 17, 33}) {
    SCOPED_TRACE("shared prefix " + std::to_string(shared_len));
    const auto prefix = tokens(shared_len, uint32_t(shared_len));
    Engine engine(*model, options(64));
    EngineRunner run(engine);
    run.submit(request(cat(prefix, tokens(9, 100 + uint32_t(shared_len))), false));
    run.wait_all();
    for (bool seeded : {false, true}) {
      const auto second = request(cat(prefix, tokens(7, 200 + uint32_t(shared_len) + seeded)), seeded);
      auto got = run.submit(second);
      run.wait_all();
      EXPECT_EQ(got->result.cached_tokens, resumable(shared_len));
      EXPECT_TRUE(same_bits(got->tokens, fresh(second))) << (seeded ? "seeded" : "greedy");
    }
    const EngineStats s = engine.stats();
    EXPECT_EQ(s.kv_pages_used, s.prompt_cache.device_pages);
  }
}

TEST_P(PromptCacheResume, SecondTurnResumesAfterTheFirstReply) {
  const auto turn1 = tokens(30, 1);
  Engine engine(*model, options(64));
  EngineRunner run(engine);
  auto first = run.submit(request(turn1, true));
  run.wait_all();
  std::vector<int32_t> reply;
  for (const auto& t : first->tokens) reply.push_back(t.id);
  const auto turn2 = request(cat(cat(turn1, reply), tokens(5, 2)), true);
  auto second = run.submit(turn2);
  run.wait_all();
  // Every position with K/V from turn 1: the prompt and all but the last reply token.
  EXPECT_EQ(second->result.cached_tokens, int(turn1.size() + reply.size()) - 1);
  EXPECT_TRUE(same_bits(second->tokens, fresh(turn2)));
}

FS_CONFORMANCE_INSTANCES(PromptCacheResume);

}  // namespace
}  // namespace fs::test

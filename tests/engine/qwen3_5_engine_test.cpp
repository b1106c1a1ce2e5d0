// The engine on a hybrid model (tiny-qwen3.5: Gated DeltaNet layers with a recurrent state slot per stream beside
// K/V pages for its attention layer): preempted == solo (its prefix and state parked in the prompt cache), bit for
// bit.
#include <gtest/gtest.h>

#include <random>

#include "engine_runner.h"
#include "io/safetensors.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

class Qwen35Engine : public TinyQwen35Test {
 protected:
  GenerationRequest request(int i, int max_tokens) const {
    std::mt19937 rng(uint32_t(100 + i));
    std::uniform_int_distribution<int32_t> token(0, config.vocab_size - 1);
    GenerationRequest r;
    r.prompt.resize(size_t(5 + 9 * i));  // 5 .. 68 tokens: chunk edges fall everywhere
    for (auto& t : r.prompt) t = token(rng);
    r.max_tokens = max_tokens;
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 3;
    if (i % 2) {
      r.sampling.temperature = 0.8f;
      r.sampling.seed = uint64_t(7 + i);
    } else {
      r.sampling.temperature = 0.0f;
    }
    return r;
  }

  std::vector<std::vector<SampledToken>> solo_runs(int streams, int max_tokens) {
    std::vector<std::vector<SampledToken>> want;
    for (int i = 0; i < streams; ++i) want.push_back(run_solo(*model, request(i, max_tokens)));
    return want;
  }

};

TEST_F(Qwen35Engine, PreemptedStreamsRecomputeTheirStateAndEqualTheirSoloRuns) {
  constexpr int kStreams = 8, kMaxTokens = 24, kPoolPages = 12;
  const auto want = solo_runs(kStreams, kMaxTokens);
  EngineOptions o;
  o.parallel = kStreams;
  o.context = 128;
  o.prefill_chunk = 16;
  o.round_tokens = 48;
  o.kv_pages = kPoolPages;
  o.prompt_cache_pages = 8;  // preempted streams park their prefix with its state here
  Engine engine(*model, o);
  EngineRunner runner(engine);
  std::vector<std::shared_ptr<Collected>> got;
  for (int i = 0; i < kStreams; ++i) got.push_back(runner.submit(request(i, kMaxTokens)));
  runner.wait_all();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_TRUE(same_bits(got[size_t(i)]->tokens, want[size_t(i)]));
    EXPECT_EQ(got[size_t(i)]->result.reason, FinishReason::Length);
  }
  const EngineStats s = engine.stats();
  EXPECT_GT(s.preemptions, 0u);
  EXPECT_EQ(s.kv_pages_used, s.prompt_cache.device_pages);
  EXPECT_EQ(s.prompt_cache.lookups, uint64_t(kStreams));
}

}  // namespace
}  // namespace fs::test

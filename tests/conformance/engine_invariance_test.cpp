// (4) Through the real engine, 8 concurrent streams, their prefill chunks (1, 3, 17, 64) interleaved with decode
// rows, == each stream alone: greedy and seeded sampling, with logprobs and without (where a backend may sample on
// its device), bit for bit.
#include <gtest/gtest.h>

#include "conformance.h"
#include "engine/engine_runner.h"
#include "random_tokens.h"

namespace fs::test {
namespace {

class EngineInvariance : public Conformance {
 protected:
  GenerationRequest request(int i) const {
    GenerationRequest r;
    r.prompt = random_tokens(3 + 7 * i, uint32_t(100 + i), config.vocab_size);  // 3 .. 52 tokens
    r.max_tokens = 8;
    r.sampling.seed = 1000 + uint64_t(i);
    r.sampling.temperature = i % 2 ? 0.9f : 0.0f;
    if (i % 4 == 1) r.sampling.top_p = 0.95f;
    if (i % 4 < 2) {
      r.sampling.logprobs = true;
      r.sampling.top_logprobs = 3;
    }
    return r;
  }
};

TEST_P(EngineInvariance, ConcurrentEqualsSolo) {
  constexpr int kStreams = 8;
  EngineOptions solo;
  solo.context = 128;
  std::vector<std::vector<SampledToken>> want;
  for (int i = 0; i < kStreams; ++i) want.push_back(run_solo(*model, request(i), solo));

  for (int chunk : {1, 3, 17, 64}) {
    SCOPED_TRACE("prefill chunk " + std::to_string(chunk));
    EngineOptions o;
    o.parallel = kStreams;
    o.context = 128;
    o.prefill_chunk = chunk;
    o.round_tokens = 2 * chunk + kStreams;
    Engine engine(*model, o);
    EngineRunner runner(engine);
    std::vector<std::shared_ptr<Collected>> got;
    for (int i = 0; i < kStreams; ++i) {
      got.push_back(runner.submit(request(i)));
      if (i % 3 == 2) runner.wait_tokens(got[size_t(i) - 1], 2);  // staggered arrivals
    }
    runner.wait_all();
    for (int i = 0; i < kStreams; ++i) {
      SCOPED_TRACE("stream " + std::to_string(i));
      EXPECT_EQ(got[size_t(i)]->result.reason, FinishReason::Length);
      EXPECT_EQ(got[size_t(i)]->tokens.size(), 8u);
      EXPECT_TRUE(same_bits(got[size_t(i)]->tokens, want[size_t(i)]));
    }
    EXPECT_EQ(engine.stats().kv_pages_used, 0);
  }
}

FS_CONFORMANCE_INSTANCES(EngineInvariance);

}  // namespace
}  // namespace fs::test

// The engine on a hybrid model (tiny-qwen3.5: Gated DeltaNet layers with a recurrent state slot per stream beside
// K/V pages for its attention layer): preempted == solo (its prefix and state parked in the prompt cache), bit for
// bit.
#include <gtest/gtest.h>

#include <mutex>
#include <random>

#include "engine_runner.h"
#include "forwarding_model.h"
#include "io/safetensors.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

// The CPU model as the engine sees it when prompt chunks must end at multiples of 16 positions; every call goes to the
// real model, and each chunk's start, length and prompt mark are recorded.
class AlignedModel final : public ForwardingModel {
 public:
  struct Chunk {
    int start, rows;
    bool prompt;
  };
  using ForwardingModel::ForwardingModel;
  std::vector<float> forward(std::span<const SequenceChunk> chunks, KvPool& pool) override {
    {
      std::lock_guard lock(mutex_);
      for (const SequenceChunk& c : chunks) seen_.push_back({c.start_pos, int(c.tokens.size()), c.prompt});
    }
    return ForwardingModel::forward(chunks, pool);
  }
  int prompt_alignment() const override { return 16; }
  std::vector<Chunk> seen() {
    std::lock_guard lock(mutex_);
    return seen_;
  }

 private:
  std::mutex mutex_;
  std::vector<Chunk> seen_;
};

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

TEST_F(Qwen35Engine, AlignedPromptChunksStartAtMultiplesOfTheAlignment) {
  // Prompts of 5 … 68 tokens in rounds of 20 rows with a 5-position prefill chunk (taken up to 16), the prompt cache
  // on: every prompt chunk, resumed ones included, starts at a multiple of 16; the replies equal solo runs.
  constexpr int kStreams = 8, kMaxTokens = 12;
  const auto want = solo_runs(kStreams, kMaxTokens);
  AlignedModel aligned(*model);
  EngineOptions o;
  o.parallel = 3;
  o.context = 128;
  o.prefill_chunk = 5;
  o.round_tokens = 20;
  o.prompt_cache_pages = 24;
  o.prompt_cache_state_stride = 16;
  Engine engine(aligned, o);
  EngineRunner runner(engine);
  std::vector<std::shared_ptr<Collected>> got;
  for (int i = 0; i < kStreams; ++i) got.push_back(runner.submit(request(i, kMaxTokens)));
  got.push_back(runner.submit(request(kStreams - 1, kMaxTokens)));  // the last prompt again, from the cache
  runner.wait_all();
  for (int i = 0; i <= kStreams; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_TRUE(same_bits(got[size_t(i)]->tokens, want[size_t(std::min(i, kStreams - 1))]));
  }
  // A follow-up turn: the first prompt, its reply and more. The states after the reply came from decode rows, so the
  // cache must not offer them: the follow-up starts from scratch and equals its solo run.
  GenerationRequest follow = request(0, kMaxTokens);
  for (const SampledToken& t : got[0]->tokens) follow.prompt.push_back(t.id);
  for (int32_t t : request(1, 1).prompt) follow.prompt.push_back(t);
  const auto follow_want = run_solo(*model, follow);
  runner.submit(request(0, kMaxTokens));  // the first request again, so its end is the newest in the cache
  runner.wait_all();
  const size_t before = aligned.seen().size();
  const auto follow_got = runner.submit(follow);
  runner.wait_all();
  EXPECT_TRUE(same_bits(follow_got->tokens, follow_want));
  ASSERT_GT(aligned.seen().size(), before);
  EXPECT_EQ(aligned.seen()[before].start, 0);  // the first prompt's 5 positions hold no aligned state but 0
  int prompt_chunks = 0;
  for (const AlignedModel::Chunk& c : aligned.seen()) {
    if (!c.prompt) continue;
    ++prompt_chunks;
    EXPECT_EQ(c.start % 16, 0) << "a prompt chunk of " << c.rows << " rows at " << c.start;
  }
  EXPECT_GT(prompt_chunks, kStreams);
  EXPECT_GT(engine.stats().prompt_cache.hits, 0u);
}

}  // namespace
}  // namespace fs::test

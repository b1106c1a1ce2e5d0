// Speculative decoding on every backend through the real engine: replies drafted by n-grams, by a scripted drafter
// that knows the replies but gets every third guess wrong (so windows are accepted and rejected part way, and
// recurrent state rolls back) and, for attention-only fixtures, by a draft model on the same backend (a second copy
// of the fixture, so greedy guesses are the target's own) equal each request's undrafted solo run bit for bit,
// greedy and seeded with logprobs, alone and among 4 streams.
#include <gtest/gtest.h>

#include <algorithm>

#include "conformance.h"
#include "engine/drafters/model_drafter.h"
#include "engine/drafters/ngram_drafter.h"
#include "engine/engine_runner.h"
#include "random_tokens.h"

namespace fs::test {
namespace {

constexpr int kStreams = 4, kContext = 128;

// Guesses the known replies: the tokens after the stream's position in its request's reply, every third one wrong.
class ScriptedDrafter final : public Drafter {
 public:
  ScriptedDrafter(std::vector<std::vector<int32_t>> prompts, std::vector<std::vector<int32_t>> replies, int vocab)
      : prompts_(std::move(prompts)), replies_(std::move(replies)), vocab_(vocab) {}
  const char* name() const override { return "scripted"; }
  std::vector<std::vector<int32_t>> propose(std::span<const DraftRequest> requests) override {
    std::vector<std::vector<int32_t>> out;
    for (const DraftRequest& r : requests) {
      out.emplace_back();
      for (size_t i = 0; i < prompts_.size(); ++i) {
        const auto& p = prompts_[i];
        if (r.tokens.size() < p.size() || !std::equal(p.begin(), p.end(), r.tokens.begin())) continue;
        const size_t at = r.tokens.size() - p.size();  // reply tokens the stream holds, the pending one included
        for (size_t j = at; j < replies_[i].size() && int(j - at) < r.max_tokens; ++j)
          out.back().push_back(++guesses_ % 3 ? replies_[i][j] : (replies_[i][j] + 1) % vocab_);
      }
    }
    return out;
  }

 private:
  std::vector<std::vector<int32_t>> prompts_, replies_;
  int vocab_;
  uint64_t guesses_ = 0;
};

class Drafting : public Conformance {
 protected:
  // A random piece said three times, so n-grams find matches in the prompt.
  GenerationRequest request(int i) const {
    const auto piece = random_tokens(5 + 3 * i, uint32_t(300 + i), config.vocab_size);
    GenerationRequest r;
    for (int k = 0; k < 3; ++k) r.prompt.insert(r.prompt.end(), piece.begin(), piece.end());
    r.max_tokens = 12;
    r.sampling.seed = 2000 + uint64_t(i);
    r.sampling.temperature = i % 2 ? 0.9f : 0.0f;
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 2;
    return r;
  }

  // Every request in one engine with `drafter` proposing 4 tokens a round; the engine's stats after.
  EngineStats run_drafted(std::shared_ptr<Drafter> drafter, int parallel,
                          const std::vector<std::vector<SampledToken>>& want) {
    EngineOptions o;
    o.parallel = parallel;
    o.context = kContext;
    o.drafter = std::move(drafter);
    o.draft_tokens = 4;
    Engine engine(*model, o);
    EngineRunner runner(engine);
    std::vector<std::shared_ptr<Collected>> got;
    for (int i = 0; i < kStreams; ++i) got.push_back(runner.submit(request(i)));
    runner.wait_all();
    for (int i = 0; i < kStreams; ++i) {
      SCOPED_TRACE("request " + std::to_string(i));
      EXPECT_TRUE(same_bits(got[size_t(i)]->tokens, want[size_t(i)]));
    }
    EXPECT_EQ(engine.stats().kv_pages_used, 0);
    return engine.stats();
  }
};

TEST_P(Drafting, DraftedRepliesEqualUndraftedSoloRuns) {
  EngineOptions solo;
  solo.context = kContext;
  std::vector<std::vector<SampledToken>> want;
  for (int i = 0; i < kStreams; ++i) want.push_back(run_solo(*model, request(i), solo));

  std::vector<std::vector<int32_t>> prompts, replies;
  for (int i = 0; i < kStreams; ++i) {
    prompts.push_back(request(i).prompt);
    replies.emplace_back();
    for (const SampledToken& t : want[size_t(i)]) replies.back().push_back(t.id);
  }

  for (int parallel : {1, kStreams}) {
    SCOPED_TRACE("parallel " + std::to_string(parallel));
    run_drafted(std::make_shared<NgramDrafter>(), parallel, want);
    const EngineStats scripted =
        run_drafted(std::make_shared<ScriptedDrafter>(prompts, replies, config.vocab_size), parallel, want);
    EXPECT_GT(scripted.accepted_tokens, 0u);
    EXPECT_LT(scripted.accepted_tokens, scripted.drafted_tokens);
    if (model->memory_spec().has_state()) continue;  // a draft model carries no recurrent state
    const int pages = kStreams * (kContext / 16 + 1);
    auto self = std::make_shared<ModelDrafter>(create_instance_model(GetParam(), config, checkpoint), "self", pages);
    const EngineStats drafted = run_drafted(self, parallel, want);
    EXPECT_GT(drafted.drafted_tokens, 0u);
    EXPECT_GT(drafted.accepted_tokens, 0u);  // the greedy replies' guesses are the target's own picks
  }
}

FS_CONFORMANCE_INSTANCES(Drafting);

}  // namespace
}  // namespace fs::test

// Engine edges: queue limit, cancellation, the context limit, bad prompts, eos, and stop from the callback.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine_runner.h"
#include "io/safetensors.h"
#include "models/model.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

class EngineLimits : public FortuneDemoTest {
 protected:
  GenerationRequest request(int prompt_len, int max_tokens) {
    GenerationRequest r;
    for (int i = 0; i < prompt_len; ++i) r.prompt.push_back(100 + i);
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0;
    return r;
  }
};

TEST_F(EngineLimits, BadPromptsAreRefusedBeforeQueueing) {
  EngineOptions o;
  o.context = 32;
  Engine e(*model, o);
  EXPECT_THROW(e.submit(request(0, 4)), Error);
  EXPECT_THROW(e.submit(request(32, 4)), Error);
  auto r = request(4, 4);
  r.prompt[1] = config.vocab_size;
  EXPECT_THROW(e.submit(r), Error);
  EXPECT_EQ(e.stats().queued, 0);
}

TEST_F(EngineLimits, GenerationStopsAtTheContextWithLength) {
  EngineOptions o;
  o.context = 24;
  Engine e(*model, o);
  EngineRunner run(e);
  auto c = run.submit(request(20, 100));
  run.wait_all();
  EXPECT_EQ(c->result.reason, FinishReason::Length);
  EXPECT_EQ(c->tokens.size(), 4u);
}

TEST_F(EngineLimits, FullQueueRefusesAndCancelFreesTheStream) {
  EngineOptions o;
  o.parallel = 1;
  o.queue_limit = 1;
  o.context = 2048;
  Engine e(*model, o);
  std::mutex mu;
  std::condition_variable cv;
  int seen = 0;
  bool done = false;
  FinishReason reason{};
  auto long_req = request(8, 1500);
  long_req.on_token = [&](const SampledToken&) {
    std::lock_guard lock(mu);
    ++seen;
    cv.notify_all();
    return true;
  };
  long_req.on_done = [&](const GenerationResult& r) {
    std::lock_guard lock(mu);
    done = true;
    reason = r.reason;
    cv.notify_all();
  };
  auto handle = e.submit(long_req);
  ASSERT_TRUE(handle);
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return seen > 0; });
  }
  ASSERT_TRUE(e.submit(request(4, 2)));   // waits in the queue
  EXPECT_FALSE(e.submit(request(4, 2)));  // the queue is full
  handle->cancel();
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  EXPECT_EQ(reason, FinishReason::Cancelled);
  EXPECT_LT(seen, 1500);
}

TEST_F(EngineLimits, CallbackReturningFalseStopsAndEosIsNotEmitted) {
  Engine e(*model, EngineOptions{});
  EngineRunner run(e);
  auto greedy = run.submit(request(6, 5));
  run.wait_all();
  ASSERT_EQ(greedy->tokens.size(), 5u);
  auto with_eos = request(6, 5);
  with_eos.eos_ids = {greedy->tokens[2].id};
  auto c = run.submit(with_eos);
  run.wait_all();
  EXPECT_EQ(c->result.reason, FinishReason::Stop);
  EXPECT_EQ(c->tokens.size(), 2u);
  EXPECT_EQ(c->result.completion_tokens, 3);
  EXPECT_EQ(e.stats().kv_pages_used, 0);
}

}  // namespace
}  // namespace fs::test

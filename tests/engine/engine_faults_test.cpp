// A fault inside a round (a forward pass, the prompt cache's page moves, a callback) ends the streams it touches
// with FinishReason::Error and its message, frees their pages, and the engine serves the next request bit-exactly.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <random>

#include "core/error.h"
#include "engine_runner.h"
#include "forwarding_model.h"

namespace fs::test {
namespace {

// Wraps a real model and throws where a test arms it; the first forward pass can be held until released.
class FaultyModel : public ForwardingModel {
 public:
  explicit FaultyModel(Model& inner) : ForwardingModel(inner) {}

  std::atomic<int> fail_forward_call{-1};  // the forward pass (counted from 0) that throws
  std::atomic<bool> fail_copy{false}, fail_save{false};

  void hold_first_forward() { held_ = true; }
  void release_first_forward() {
    std::lock_guard lock(mu_);
    held_ = false;
    cv_.notify_all();
  }

  bool samples_on_device() const override { return inner_.samples_on_device(); }
  SampledForward forward_sampled(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                                 KvPool& pool) override {
    const int call = calls_++;
    if (call == 0) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !held_; });
    }
    if (call == fail_forward_call) throw Error("injected forward fault");
    return inner_.forward_sampled(chunks, rows, pool);
  }
  bool kv_on_host() const override { return inner_.kv_on_host(); }
  void attach_pool(KvPool& pool) override { inner_.attach_pool(pool); }
  void copy_kv_positions(KvPool& pool, int32_t from, int32_t to, int positions) override {
    if (fail_copy) throw Error("injected copy fault");
    inner_.copy_kv_positions(pool, from, to, positions);
  }
  void save_kv_page(KvPool& pool, int32_t page, float* dst) override {
    if (fail_save) throw Error("injected save fault");
    inner_.save_kv_page(pool, page, dst);
  }
  void load_kv_page(KvPool& pool, int32_t page, const float* src) override { inner_.load_kv_page(pool, page, src); }

 private:
  std::atomic<int> calls_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
};

class EngineFaults : public FortuneDemoTest {
 protected:
  std::vector<int32_t> prompt(int n, int first) {
    std::mt19937 rng(uint32_t(n * 131 + first));
    std::uniform_int_distribution<int32_t> d(0, config.vocab_size - 1);
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (auto& t : p) t = d(rng);
    p[0] = first;
    return p;
  }
  static GenerationRequest request(std::vector<int32_t> p, int max_tokens) {
    GenerationRequest r;
    r.prompt = std::move(p);
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0.8f;
    r.sampling.seed = 5;
    r.sampling.logprobs = true;
    return r;
  }
  // The engine serves `req` after a fault exactly as a fresh engine would.
  void expect_serves(Engine& e, const GenerationRequest& req) {
    EngineRunner run(e);
    auto c = run.submit(req);
    run.wait_all();
    EXPECT_EQ(c->result.reason, FinishReason::Length);
    EXPECT_TRUE(same_bits(c->tokens, run_solo(*model, req)));
    const EngineStats s = e.stats();
    EXPECT_EQ(s.kv_pages_used, s.prompt_cache.device_pages);
  }
};

TEST_F(EngineFaults, AThrowingOnTokenEndsOnlyItsStream) {
  Engine e(*model, EngineOptions{});
  EngineRunner run(e);
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  std::optional<GenerationResult> result;
  auto bad = request(prompt(12, 1), 10);
  bad.on_token = [&](const SampledToken&) -> bool {
    std::lock_guard lock(mu);
    if (++calls == 3) throw std::runtime_error("injected callback fault");
    return true;
  };
  bad.on_done = [&](const GenerationResult& r) {
    std::lock_guard lock(mu);
    result = r;
    cv.notify_all();
  };
  ASSERT_TRUE(e.submit(bad));
  const auto good_req = request(prompt(17, 2), 10);
  auto good = run.submit(good_req);
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return result.has_value(); });
  }
  run.wait_all();
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(result->reason, FinishReason::Error);
  EXPECT_NE(result->error.find("injected callback fault"), std::string::npos) << result->error;
  EXPECT_EQ(result->completion_tokens, 3);
  EXPECT_EQ(good->result.reason, FinishReason::Length);
  EXPECT_TRUE(same_bits(good->tokens, run_solo(*model, good_req)));
  expect_serves(e, request(prompt(9, 3), 6));
}

TEST_F(EngineFaults, AThrowingOnDoneIsContained) {
  Engine e(*model, EngineOptions{});
  std::atomic<int> done_calls{0};
  auto req = request(prompt(8, 1), 3);
  req.on_done = [&](const GenerationResult&) {
    ++done_calls;
    throw std::runtime_error("injected on_done fault");
  };
  ASSERT_TRUE(e.submit(req));
  expect_serves(e, request(prompt(11, 2), 5));
  EXPECT_EQ(done_calls.load(), 1);
}

TEST_F(EngineFaults, AForwardFaultEndsTheStreamsOfItsRound) {
  FaultyModel faulty(*model);
  faulty.hold_first_forward();
  faulty.fail_forward_call = 1;
  Engine e(faulty, EngineOptions{});
  EngineRunner run(e);
  auto a = run.submit(request(prompt(10, 1), 8));
  auto b = run.submit(request(prompt(14, 2), 8));
  faulty.release_first_forward();
  run.wait_all();
  for (const auto& c : {a, b}) {
    EXPECT_EQ(c->result.reason, FinishReason::Error);
    EXPECT_NE(c->result.error.find("injected forward fault"), std::string::npos) << c->result.error;
  }
  EXPECT_EQ(a->tokens.size(), 1u);  // its first round ran
  expect_serves(e, request(prompt(10, 1), 8));
}

EngineOptions with_cache(int pool_pages, int host_pages) {
  EngineOptions o;
  o.context = 256;
  o.prefill_chunk = 64;
  o.kv_pages = pool_pages;
  o.prompt_cache_pages = pool_pages;
  o.prompt_cache_host_pages = host_pages;
  return o;
}

TEST_F(EngineFaults, APromptCacheFaultDuringAdmissionEndsTheAdmittedStream) {
  FaultyModel faulty(*model);
  Engine e(faulty, with_cache(32, 0));
  EngineRunner run(e);
  const auto first = prompt(20, 1);
  run.submit(request(first, 4));
  run.wait_all();
  // Shares ten tokens with the cached prompt: adopting them copies part of a page.
  auto second = prompt(20, 2);
  std::copy(first.begin(), first.begin() + 10, second.begin());
  faulty.fail_copy = true;
  auto c = run.submit(request(second, 4));
  run.wait_all();
  EXPECT_EQ(c->result.reason, FinishReason::Error);
  EXPECT_NE(c->result.error.find("injected copy fault"), std::string::npos) << c->result.error;
  EXPECT_TRUE(c->tokens.empty());
  faulty.fail_copy = false;
  expect_serves(e, request(second, 4));
}

TEST_F(EngineFaults, AFaultWhileEvictingForARoundEndsItsStreams) {
  FaultyModel faulty(*model);
  Engine e(faulty, with_cache(8, 8));
  EngineRunner run(e);
  run.submit(request(prompt(60, 1), 20));  // leaves 5 of the 8 pages in the prompt cache
  run.wait_all();
  ASSERT_EQ(e.stats().prompt_cache.device_pages, 5);
  faulty.fail_save = true;  // the next page must come from evicting one to the host tier
  auto c = run.submit(request(prompt(60, 2), 4));
  run.wait_all();
  EXPECT_EQ(c->result.reason, FinishReason::Error);
  EXPECT_NE(c->result.error.find("injected save fault"), std::string::npos) << c->result.error;
  faulty.fail_save = false;
  expect_serves(e, request(prompt(60, 2), 4));
}

}  // namespace
}  // namespace fs::test

// Batch invariance: a stream's tokens and logprobs are bit-identical alone or among others, chunked or whole.
#include <gtest/gtest.h>

#include <random>

#include "engine_runner.h"
#include "io/safetensors.h"
#include "models/kv_pool.h"
#include "models/model.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

struct Fixture {
  ModelConfig config;
  std::unique_ptr<Model> model;
  explicit Fixture(const std::filesystem::path& dir)
      : config(load_model_config(dir)), model(create_model(config, Checkpoint::open(dir))) {}
};

std::vector<int32_t> random_prompt(std::mt19937& rng, int len, int vocab) {
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = d(rng);
  return p;
}

GenerationRequest make_request(const std::vector<int32_t>& prompt, int max_tokens, bool seeded, uint64_t seed) {
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 5;
  if (seeded) {
    r.sampling.temperature = 0.9f;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = seed;
  } else {
    r.sampling.temperature = 0.0f;
  }
  return r;
}

std::vector<SampledToken> solo(Model& model, const GenerationRequest& req) {
  EngineOptions o;
  o.parallel = 1;
  o.context = 512;
  o.prefill_chunk = 512;
  o.round_tokens = 512;
  Engine engine(model, o);
  EngineRunner runner(engine);
  auto c = runner.submit(req);
  runner.wait_all();
  return c->tokens;
}

TEST(BatchInvariance, ModelRowsAloneEqualRowsAmongOthers) {
  FS_REQUIRE_SHARED(shared);
  Fixture f(shared / "models/tiny-qwen3");
  std::mt19937 rng(7);
  KvPool pool(f.config.num_layers, f.config.num_kv_heads, f.config.head_dim, 16, 64);
  auto take = [&](int n) {
    std::vector<int32_t> pages;
    for (int i = 0; i < n; ++i) pages.push_back(*pool.allocate());
    return pages;
  };
  auto a = random_prompt(rng, 37, f.config.vocab_size), b = random_prompt(rng, 5, f.config.vocab_size);
  auto pa = take(3), pb = take(1), pa2 = take(3);
  SequenceChunk alone{a, 0, pa, true};
  auto ref = f.model->forward(std::span<const SequenceChunk>(&alone, 1), pool);
  std::vector<SequenceChunk> mixed{SequenceChunk{b, 0, pb, true}, SequenceChunk{a, 0, pa2, true}};
  auto got = f.model->forward(mixed, pool);
  const size_t V = size_t(f.config.vocab_size);
  ASSERT_EQ(got.size(), (a.size() + b.size()) * V);
  EXPECT_EQ(0, std::memcmp(ref.data(), got.data() + b.size() * V, ref.size() * sizeof(float)));
}

class EngineInvariance : public ::testing::TestWithParam<bool> {};

TEST_P(EngineInvariance, ConcurrentAndChunkedEqualSolo) {
  FS_REQUIRE_SHARED(shared);
  const bool seeded = GetParam();
  Fixture f(shared / "models/fortune-demo");
  std::mt19937 rng(seeded ? 11 : 5);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 10; ++i) {
    int len = std::uniform_int_distribution<int>(1, 90)(rng);
    reqs.push_back(make_request(random_prompt(rng, len, f.config.vocab_size), 12, seeded, 1000 + uint64_t(i)));
  }
  std::vector<std::vector<SampledToken>> want;
  for (const auto& r : reqs) want.push_back(solo(*f.model, r));

  for (int chunk : {1, 3, 17, 64}) {
    SCOPED_TRACE("prefill chunk " + std::to_string(chunk));
    EngineOptions o;
    o.parallel = 6;
    o.context = 512;
    o.prefill_chunk = chunk;
    o.round_tokens = chunk * 2 + 3;
    Engine engine(*f.model, o);
    EngineRunner runner(engine);
    std::vector<std::shared_ptr<Collected>> got;
    for (size_t i = 0; i < reqs.size(); ++i) {
      got.push_back(runner.submit(reqs[i]));
      if (i % 3 == 2) runner.wait_tokens(got[i - 1], 2);  // staggered arrivals
    }
    runner.wait_all();
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_TRUE(same_bits(got[i]->tokens, want[i])) << "request " << i;
      EXPECT_EQ(got[i]->result.reason, FinishReason::Length);
    }
    EXPECT_EQ(engine.stats().kv_pages_used, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(GreedyAndSeeded, EngineInvariance, ::testing::Values(false, true));

}  // namespace
}  // namespace fs::test

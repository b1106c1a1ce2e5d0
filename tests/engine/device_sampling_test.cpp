// The engine's route per request between host sampling and a model that picks tokens itself: a CPU probe model
// implements the hook (argmax, the host draw with the uploaded uniform, the host's logprobs), so replies must equal
// the plain model's, each request's rows must take the route its own parameters choose, and mixed rounds must unpack
// correctly.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <random>

#include "core/error.h"
#include "engine/row_sampling.h"
#include "engine/sampler.h"
#include "engine_runner.h"
#include "forwarding_model.h"
#include "io/safetensors.h"
#include "models/kv_pool.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

// Delegates the forward to a CPU model and picks the tokens of Greedy and Draw rows on the host.
class ProbeModel final : public ForwardingModel {
 public:
  // `lie`: ids for rows that asked for logits; `drop_logprobs`: no logprobs for rows that asked for them.
  explicit ProbeModel(Model& inner, bool lie = false, bool drop_logprobs = false)
      : ForwardingModel(inner), lie_(lie), drop_logprobs_(drop_logprobs) {}
  bool samples_on_device() const override { return true; }

  SampledForward forward_sampled(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                                 KvPool& pool) override {
    auto logits = inner_.forward(chunks, pool);
    const size_t V = size_t(config().vocab_size);
    EXPECT_EQ(logits.size(), rows.size() * V);
    SampledForward out;
    for (size_t r = 0; r < rows.size(); ++r) {
      std::span<const float> l(logits.data() + r * V, V);
      const RowSampling& rs = rows[r];
      {
        std::lock_guard lock(mu_);
        ++modes_[int(rs.mode)];
      }
      if (rs.mode == RowSampling::Mode::Logits && !lie_) {
        out.ids.push_back(-1);
        out.logits.insert(out.logits.end(), l.begin(), l.end());
      } else if (rs.mode == RowSampling::Mode::Draw) {
        SamplingParams p;
        p.temperature = rs.temperature;
        p.top_k = rs.top_k;
        p.top_p = rs.top_p;
        p.min_p = rs.min_p;
        out.ids.push_back(draw_token(l, p, rs.uniform));
      } else {
        out.ids.push_back(int32_t(std::max_element(l.begin(), l.end()) - l.begin()));
      }
      if (rs.logprobs >= 0 && out.ids.back() >= 0 && !drop_logprobs_) {
        out.logprobs.resize(rows.size());
        LogprobTable t = logprob_table(l, rs.logprobs);
        out.logprobs[r] = {true, l[size_t(out.ids.back())] - t.log_sum_exp, std::move(t.top)};
      }
    }
    return out;
  }
  // Rows seen per mode: Logits, Greedy, Draw.
  std::array<int, 3> modes() {
    std::lock_guard lock(mu_);
    return modes_;
  }

 private:
  bool lie_, drop_logprobs_;
  std::mutex mu_;
  std::array<int, 3> modes_{};
};

std::vector<int32_t> random_prompt(std::mt19937& rng, int len, int vocab) {
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = d(rng);
  return p;
}

// Requests of every kind: greedy and seeded draws with top-k/top-p/min-p, with and without logprobs, and host-only
// ones (penalties).
std::vector<GenerationRequest> mixed_requests(int vocab) {
  std::mt19937 rng(21);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    GenerationRequest r;
    r.prompt = random_prompt(rng, 3 + 7 * i % 23, vocab);
    r.max_tokens = 6 + i % 3;
    r.sampling.seed = 500 + uint64_t(i);
    switch (i % 8) {
      case 0: r.sampling.temperature = 0.0f; break;
      case 1: r.sampling.temperature = 0.8f; break;
      case 2: r.sampling.temperature = 1.1f, r.sampling.top_k = 7; break;
      case 3:
        r.sampling.temperature = 0.9f, r.sampling.top_p = 0.6f, r.sampling.min_p = 0.05f;
        r.sampling.logprobs = true;
        break;
      case 4: r.sampling.temperature = 0.7f, r.sampling.presence_penalty = 0.5f; break;
      case 5: r.sampling.temperature = 0.0f, r.sampling.repetition_penalty = 1.3f; break;
      case 6: r.sampling.temperature = 0.0f, r.sampling.logprobs = true, r.sampling.top_logprobs = 3; break;
      case 7: r.sampling.temperature = 1.0f, r.sampling.frequency_penalty = 0.4f, r.sampling.top_k = 20; break;
    }
    reqs.push_back(r);
  }
  return reqs;
}

std::vector<std::shared_ptr<Collected>> run(Model& model, const std::vector<GenerationRequest>& reqs, int parallel,
                                            bool device_sampling = true) {
  EngineOptions o;
  o.parallel = parallel;
  o.context = 256;
  o.prefill_chunk = 5;
  o.round_tokens = 40;
  o.device_sampling = device_sampling;
  Engine engine(model, o);
  EngineRunner runner(engine);
  std::vector<std::shared_ptr<Collected>> out;
  for (const auto& r : reqs) out.push_back(runner.submit(r));
  runner.wait_all();
  return out;
}

class DeviceSampling : public ::testing::Test {
 protected:
  void SetUp() override {
    FS_REQUIRE_SHARED(shared);
    auto dir = shared / "models/tiny-qwen3";
    config = load_model_config(dir);
    model = create_model(config, Checkpoint::open(dir));
  }
  ModelConfig config;
  std::unique_ptr<Model> model;
};

TEST(RowSampling, RouteDependsOnTheRequestAlone) {
  SamplingParams p;
  EXPECT_TRUE(device_sampleable(p));
  p.top_k = 5, p.top_p = 0.5f, p.min_p = 0.1f, p.temperature = 0.3f;
  EXPECT_TRUE(device_sampleable(p));
  p.logprobs = true, p.top_logprobs = 2;
  EXPECT_TRUE(device_sampleable(p));
  for (int i = 0; i < 3; ++i) {
    SamplingParams q = p;
    if (i == 0) q.presence_penalty = 0.1f;
    if (i == 1) q.frequency_penalty = -0.1f;
    if (i == 2) q.repetition_penalty = 1.1f;
    EXPECT_FALSE(device_sampleable(q)) << i;
  }
}

TEST(RowSampling, RowsCarryTheModeAndTheKeyedDraw) {
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(row_sampling_for(p, false, 1, 2).mode, RowSampling::Mode::Logits);
  EXPECT_EQ(row_sampling_for(p, true, 1, 2).mode, RowSampling::Mode::Greedy);
  p.temperature = 0.7f, p.top_k = 9, p.top_p = 0.8f, p.min_p = 0.02f;
  RowSampling r = row_sampling_for(p, true, 77, 130);
  EXPECT_EQ(r.mode, RowSampling::Mode::Draw);
  EXPECT_EQ(r.temperature, 0.7f);
  EXPECT_EQ(r.top_k, 9);
  EXPECT_EQ(r.top_p, 0.8f);
  EXPECT_EQ(r.min_p, 0.02f);
  EXPECT_EQ(r.uniform, keyed_uniform(77, 130));
  EXPECT_NE(r.uniform, row_sampling_for(p, true, 77, 131).uniform);
  EXPECT_EQ(r.logprobs, -1);
  p.logprobs = true;
  EXPECT_EQ(row_sampling_for(p, true, 77, 130).logprobs, 0);
  p.top_logprobs = 5;
  EXPECT_EQ(row_sampling_for(p, true, 77, 130).logprobs, 5);
  EXPECT_EQ(row_sampling_for(p, false, 77, 130).logprobs, -1);
}

TEST_F(DeviceSampling, RepliesEqualHostSamplingAloneAndMixed) {
  auto reqs = mixed_requests(config.vocab_size);
  auto host = run(*model, reqs, 4);
  ProbeModel probe(*model);
  auto mixed = run(probe, reqs, 4);
  ASSERT_EQ(host.size(), mixed.size());
  int eligible_tokens = 0, other_tokens = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(mixed[i]->result.reason, host[i]->result.reason) << mixed[i]->result.error;
    EXPECT_TRUE(same_bits(host[i]->tokens, mixed[i]->tokens));
    ASSERT_FALSE(host[i]->tokens.empty());
    (device_sampleable(reqs[i].sampling) ? eligible_tokens : other_tokens) += host[i]->result.completion_tokens;
    ProbeModel alone(*model);
    auto solo = run(alone, {reqs[i]}, 1);
    EXPECT_TRUE(same_bits(host[i]->tokens, solo[0]->tokens));
    auto m = alone.modes();
    if (device_sampleable(reqs[i].sampling)) {
      EXPECT_EQ(m[0], 0);
      EXPECT_EQ(m[1] + m[2], solo[0]->result.completion_tokens);
      EXPECT_EQ(m[reqs[i].sampling.temperature > 0 ? 1 : 2], 0);
    } else {
      EXPECT_EQ(m[1] + m[2], 0);
      EXPECT_EQ(m[0], solo[0]->result.completion_tokens);
    }
  }
  // Among others each request's rows took the same route as alone.
  auto m = probe.modes();
  EXPECT_EQ(m[1] + m[2], eligible_tokens);
  EXPECT_EQ(m[0], other_tokens);
  EXPECT_GT(eligible_tokens, 0);
  EXPECT_GT(other_tokens, 0);
}

TEST_F(DeviceSampling, EngineOptionKeepsEveryRowOnTheHost) {
  auto reqs = mixed_requests(config.vocab_size);
  ProbeModel probe(*model);
  auto got = run(probe, reqs, 3, false);
  auto host = run(*model, reqs, 3);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_TRUE(same_bits(host[i]->tokens, got[i]->tokens)) << i;
  auto m = probe.modes();
  EXPECT_EQ(m[1] + m[2], 0);
  EXPECT_GT(m[0], 0);
}

TEST_F(DeviceSampling, ModelsWithoutTheHookReturnLogitsForEveryRow) {
  KvPool pool(config.num_layers, config.num_kv_heads, config.head_dim, 16, 8);
  std::vector<int32_t> pages{*pool.allocate()};
  std::vector<int32_t> ids{1, 2, 3};
  SequenceChunk c{ids, 0, pages};
  std::vector<RowSampling> rows(1);
  rows[0].mode = RowSampling::Mode::Greedy;
  EXPECT_FALSE(model->samples_on_device());
  auto out = model->forward_sampled(std::span<const SequenceChunk>(&c, 1), rows, pool);
  EXPECT_EQ(out.ids, std::vector<int32_t>{-1});
  EXPECT_EQ(out.logits.size(), size_t(config.vocab_size));
  std::vector<RowSampling> two(2);
  EXPECT_THROW(model->forward_sampled(std::span<const SequenceChunk>(&c, 1), two, pool), Error);
}

TEST_F(DeviceSampling, APickWithoutTheLogprobsItsRowAskedForIsAnError) {
  auto reqs = mixed_requests(config.vocab_size);
  ProbeModel dropper(*model, false, true);
  auto got = run(dropper, {reqs[6]}, 1);
  EXPECT_EQ(got[0]->result.reason, FinishReason::Error);
  EXPECT_NE(got[0]->result.error.find("logprobs"), std::string::npos) << got[0]->result.error;
}

TEST_F(DeviceSampling, AnIdForARowThatWasNotAskedIsAnError) {
  auto reqs = mixed_requests(config.vocab_size);
  ProbeModel liar(*model, true);
  auto got = run(liar, {reqs[4]}, 1);
  EXPECT_EQ(got[0]->result.reason, FinishReason::Error);
  EXPECT_NE(got[0]->result.error.find("not asked"), std::string::npos) << got[0]->result.error;
}

}  // namespace
}  // namespace fs::test

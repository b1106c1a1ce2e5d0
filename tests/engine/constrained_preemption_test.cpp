// Constrained streams (a JSON schema mask per stream) on a KV pool too small for all of them: streams are preempted
// and recomputed, yet every reply equals its solo run bit for bit, and each finished reply parses as the schema's JSON.
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "engine_runner.h"
#include "support/fixtures.h"
#include "text/structured/constraint_cache.h"
#include "text/tokenizer.h"

namespace fs::test {
namespace {

using json = nlohmann::json;

class ConstrainedPreemption : public FortuneDemoTest {};

TEST_F(ConstrainedPreemption, RepliesEqualTheirSoloRunsAndParse) {
  auto tok = Tokenizer::load(shared_dir() / "models/fortune-demo");
  structured::ConstraintCache cache(std::make_shared<structured::TokenVocab>(*tok));
  const json schema = {{"type", "object"},
                       {"properties", {{"word", {{"type", "string"}, {"maxLength", 12}}},
                                       {"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 999}}}}},
                       {"required", {"word", "n"}},
                       {"additionalProperties", false}};
  auto compiled = cache.get({structured::ConstraintSpec::Kind::JsonSchema, schema.dump()});
  const std::vector<int32_t> eos = {*tok->token_to_id("<|im_end|>"), *tok->token_to_id("<|endoftext|>")};
  constexpr int kStreams = 8, kMaxTokens = 40, kPoolPages = 12;
  std::mt19937 rng(11);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < kStreams; ++i) {
    GenerationRequest r;
    r.prompt.resize(size_t(24 + i * 3));
    for (auto& t : r.prompt) t = int32_t(rng() % 8000);
    r.prompt[0] = int32_t(i);
    r.max_tokens = kMaxTokens;
    r.eos_ids = eos;
    r.sampling.temperature = i % 2 ? 0.9f : 0.0f;
    r.sampling.seed = 70 + i;
    reqs.push_back(std::move(r));
  }
  // Each submission gets its own constraint state.
  auto fresh = [&](GenerationRequest r) {
    r.constraint = std::make_shared<structured::TokenConstraint>(compiled);
    return r;
  };
  std::vector<std::vector<SampledToken>> want;
  for (const auto& r : reqs) want.push_back(run_solo(*model, fresh(r)));
  EngineOptions o;
  o.parallel = kStreams;
  o.context = 256;
  o.prefill_chunk = 16;
  o.round_tokens = 48;
  o.kv_pages = kPoolPages;
  Engine engine(*model, o);
  EngineRunner runner(engine);
  std::vector<std::shared_ptr<Collected>> got;
  for (const auto& r : reqs) got.push_back(runner.submit(fresh(r)));
  runner.wait_all();
  EXPECT_GT(engine.stats().preemptions, 0u);
  int finished = 0;
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_TRUE(same_bits(got[size_t(i)]->tokens, want[size_t(i)]));
    std::vector<int32_t> ids;
    for (const auto& t : got[size_t(i)]->tokens) ids.push_back(t.id);
    const std::string text = tok->decode(ids, false);
    if (got[size_t(i)]->result.reason == FinishReason::Stop) {
      json v = json::parse(text, nullptr, false);
      ASSERT_TRUE(v.is_object()) << text;
      ++finished;
      EXPECT_TRUE(v["word"].is_string() && v["n"].is_number_integer()) << text;
    } else {
      EXPECT_EQ(got[size_t(i)]->result.reason, FinishReason::Length) << text;
    }
  }
  EXPECT_GT(finished, 0);
}

}  // namespace
}  // namespace fs::test

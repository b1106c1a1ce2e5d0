// Token-mask cost of structured output: per schema, the time to mask one 150k-entry logit row and accept the token,
// cold (first stream: masks computed by walking the vocabulary trie) and warm (a second stream reusing them); then
// the decode rate of one greedy stream through the engine with and without each constraint.
// Usage: bench_structured [MODEL_DIR] (default ../shared/models/tiny-qwen3)
#include <algorithm>
#include <chrono>
#include <future>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "text/structured/constraint_cache.h"
#include "text/tokenizer.h"

using namespace fs;
using Clock = std::chrono::steady_clock;

namespace {

struct Figures {
  double us_per_token = 0;
  double worst_us = 0;  // the slowest single token (a mask built by walking the trie)
  int tokens = 0;
};

// One seeded stream of up to 200 tokens: mask, pick a random allowed token (eos once complete), accept.
Figures run_stream(std::shared_ptr<structured::CompiledConstraint> c, uint64_t seed) {
  structured::TokenConstraint tc(c);
  std::mt19937_64 rng(seed);
  std::vector<float> logits(size_t(c->vocab().size()));
  double total = 0, worst = 0;
  int n = 0;
  for (; n < 200; ++n) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    auto t0 = Clock::now();
    size_t allowed = tc.mask(logits, {});
    auto t1 = Clock::now();
    const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    total += us;
    worst = std::max(worst, us);
    if (allowed == 0 || (tc.complete() && rng() % 3 == 0)) break;
    size_t k = rng() % allowed;
    int32_t pick = 0;
    for (size_t i = 0; i < logits.size(); ++i)
      if (logits[i] == 0.0f && k-- == 0) {
        pick = int32_t(i);
        break;
      }
    auto t2 = Clock::now();
    tc.accept(pick);
    total += std::chrono::duration<double, std::micro>(Clock::now() - t2).count();
  }
  return {n ? total / n : 0, worst, n};
}

// Tokens per second of one greedy stream of up to 128 tokens, constrained by `c` unless it is null.
std::pair<double, int> decode_rate(const LoadedModel& m, std::shared_ptr<structured::CompiledConstraint> c) {
  EngineOptions o;
  o.parallel = 1;
  o.context = 512;
  Engine engine(*m.model, o);
  std::promise<void> done;
  int tokens = 0;
  Clock::time_point first, last;
  GenerationRequest r;
  r.prompt = m.tokenizer->encode("Write a short JSON record about a person.", true);
  r.max_tokens = 128;
  if (c) r.constraint = std::make_shared<structured::TokenConstraint>(c);
  r.on_token = [&](const SampledToken&) {
    last = Clock::now();
    if (tokens++ == 0) first = last;
    return true;
  };
  r.on_done = [&](const GenerationResult&) { done.set_value(); };
  engine.submit(std::move(r));
  done.get_future().wait();
  const double secs = std::chrono::duration<double>(last - first).count();
  return {tokens > 1 && secs > 0 ? double(tokens - 1) / secs : 0.0, tokens};
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : std::string(FOLDSERVE_SOURCE_DIR) + "/../shared/models/tiny-qwen3";
  auto tok = Tokenizer::load(dir);
  auto t0 = Clock::now();
  auto vocab = std::make_shared<structured::TokenVocab>(*tok);
  std::printf("vocab %d tokens, trie %zu nodes, built in %.1f ms\n", vocab->size(), vocab->node_byte.size(),
              std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  structured::ConstraintCache cache(vocab);
  const std::vector<std::pair<const char*, structured::ConstraintSpec>> cases = {
      {"json_object", {structured::ConstraintSpec::Kind::JsonObject, ""}},
      {"schema_person",
       {structured::ConstraintSpec::Kind::JsonSchema,
        R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":130},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","age","tags"],"additionalProperties":false})"}},
      {"schema_tree",
       {structured::ConstraintSpec::Kind::JsonSchema,
        R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"c":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["v","c"]}},"$ref":"#/$defs/n"})"}},
      {"regex_phone", {structured::ConstraintSpec::Kind::Regex, R"(\+?[0-9]{1,3}[ -][0-9]{3}[ -][0-9]{4})"}},
  };
  std::printf("%-14s %10s %14s %14s %14s %8s\n", "constraint", "compile_ms", "cold_us/token", "cold_worst_us",
              "warm_us/token", "states");
  for (const auto& [name, spec] : cases) {
    auto c0 = Clock::now();
    auto compiled = cache.get(spec);
    double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - c0).count();
    Figures cold = run_stream(compiled, 1);
    Figures warm = run_stream(compiled, 1);
    std::printf("%-14s %10.2f %14.1f %14.1f %14.1f %8zu\n", name, compile_ms, cold.us_per_token, cold.worst_us,
                warm.us_per_token, compiled->automaton_states());
  }
  auto model = load_model(dir, {}, "cpu");
  auto [plain, plain_tokens] = decode_rate(*model, nullptr);
  std::printf("decode, one greedy stream on the CPU: unconstrained %.1f tok/s (%d tokens)\n", plain, plain_tokens);
  for (const auto& [name, spec] : cases) {
    auto [rate, tokens] = decode_rate(*model, cache.get(spec));
    std::printf("decode, one greedy stream on the CPU: %-14s %.1f tok/s (%d tokens), %.2f of unconstrained\n", name,
                rate, tokens, plain > 0 ? rate / plain : 0.0);
  }
  return 0;
}

// Prompt-cache benchmark: a 64-turn chat and a shared-system-prompt workload, with the cache on and off: cached
// tokens, time to first token, and kept states per GiB. Prints figures; never a test.
#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "cli/args.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "engine/memory_budget.h"
#include "models/kv_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Turn {
  double ttft = 0;
  int cached = 0;
  std::vector<int32_t> reply;
};

std::vector<int32_t> words(uint64_t seed, int n, int vocab) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(int32_t((seed * 6364136223846793005ull + uint64_t(i) * 1442695040888963407ull) >> 40) % vocab);
  return v;
}

// Submits one request and waits for it; returns time to first token and cached tokens.
Turn ask(fs::Engine& e, const std::vector<int32_t>& prompt, int max_tokens) {
  Turn t;
  std::promise<void> done;
  auto t0 = Clock::now();
  bool first = true;
  fs::GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.on_token = [&](const fs::SampledToken& s) {
    if (first) t.ttft = std::chrono::duration<double>(Clock::now() - t0).count();
    first = false;
    t.reply.push_back(s.id);
    return true;
  };
  r.on_done = [&](const fs::GenerationResult& g) {
    t.cached = g.cached_tokens;
    done.set_value();
  };
  if (!e.submit(std::move(r))) throw fs::Error("queue full");
  done.get_future().wait();
  return t;
}

fs::EngineOptions engine_options(const fs::ModelConfig& c, bool cache) {
  fs::EngineOptions o;
  o.parallel = 4;
  o.context = 4096;
  o.round_tokens = 512;
  if (cache) fs::size_prompt_cache(o, c, 1.0, 0.0);
  return o;
}

void multi_turn(fs::Model& m, bool cache, int turns) {
  fs::Engine e(m, engine_options(m.config(), cache));
  std::vector<int32_t> history;
  double ttft_sum = 0, ttft_last = 0;
  long cached = 0, prompt = 0;
  for (int i = 0; i < turns; ++i) {
    auto user = words(uint64_t(i) + 1, 24, m.config().vocab_size);
    history.insert(history.end(), user.begin(), user.end());
    Turn t = ask(e, history, 24);
    history.insert(history.end(), t.reply.begin(), t.reply.end());
    ttft_sum += t.ttft;
    ttft_last = t.ttft;
    cached += t.cached;
    prompt += long(history.size() - t.reply.size());
  }
  std::printf("64-turn chat   cache %-3s  prompt tokens %ld  cached %ld (%.0f%%)  TTFT mean %.1f ms  last turn %.1f ms\n",
              cache ? "on" : "off", prompt, cached, 100.0 * double(cached) / double(prompt), 1e3 * ttft_sum / turns,
              1e3 * ttft_last);
}

void shared_system(fs::Model& m, bool cache, int questions) {
  fs::Engine e(m, engine_options(m.config(), cache));
  auto system = words(999, 512, m.config().vocab_size);
  double ttft_sum = 0;
  long cached = 0, prompt = 0;
  for (int i = 0; i < questions; ++i) {
    auto p = system;
    auto q = words(uint64_t(i) + 5000, 16, m.config().vocab_size);
    p.insert(p.end(), q.begin(), q.end());
    Turn t = ask(e, p, 8);
    ttft_sum += t.ttft;
    cached += t.cached;
    prompt += long(p.size());
  }
  std::printf("shared system  cache %-3s  prompt tokens %ld  cached %ld (%.0f%%)  TTFT mean %.1f ms\n",
              cache ? "on" : "off", prompt, cached, 100.0 * double(cached) / double(prompt), 1e3 * ttft_sum / questions);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> a(argv + 1, argv + argc);
    fs::cli::Args args(a, {"turns", "questions", "threads"}, {});
    if (auto t = args.get("threads")) setenv("FOLDSERVE_THREADS", t->c_str(), 1);
    auto m = fs::load_model(args.positionals().empty() ? "" : args.positionals()[0], {}, "cpu");
    const auto& c = m->config;
    size_t page = fs::KvPool::bytes_per_page(c.num_layers, c.num_kv_heads, c.head_dim, 16);
    std::printf("model %s  KV bytes per position %zu  positions per GiB %zu  512-token states per GiB %zu\n",
                m->name.c_str(), page / 16, (size_t(1) << 30) / (page / 16), (size_t(1) << 30) / (page * 32));
    const int turns = int(args.get_int("turns", 64)), questions = int(args.get_int("questions", 32));
    for (bool cache : {false, true}) multi_turn(*m->model, cache, turns);
    for (bool cache : {false, true}) shared_system(*m->model, cache, questions);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_prompt_cache: %s\n", e.what());
    return 1;
  }
}

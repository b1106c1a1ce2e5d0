// Engine benchmark: memory copy rate and the bandwidth floor, batch-1 decode, prefill, and aggregate decode at
// several stream counts, each with the token_sha256 of its greedy replies. Prints figures; never a test.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "cli/args.h"
#include "core/error.h"
#include "core/sha256.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Host memory copy rate in bytes/s over a buffer larger than the caches.
double copy_rate() {
  std::vector<char> a(size_t(256) << 20, 1), b(a.size());
  std::memcpy(b.data(), a.data(), a.size());
  auto t0 = Clock::now();
  for (int i = 0; i < 4; ++i) std::memcpy(b.data(), a.data(), a.size());
  return 4.0 * double(a.size()) / seconds(t0, Clock::now());
}

std::vector<int32_t> prompt_for(int i, int len, int vocab) {
  std::vector<int32_t> p;
  for (int k = 0; k < len; ++k) p.push_back(int32_t((uint64_t(i) * 7919 + uint64_t(k) * 104729 + 13) % uint64_t(vocab)));
  return p;
}

struct RunResult {
  double wall = 0, first_token = 0, last_token = 0;
  std::vector<std::vector<int32_t>> replies;
};

RunResult run_streams(fs::Model& model, int streams, int prompt_len, int max_tokens, int chunk) {
  fs::EngineOptions o;
  o.parallel = streams;
  o.context = prompt_len + max_tokens + 1;
  o.prefill_chunk = chunk;
  o.round_tokens = std::max(chunk, streams);
  o.queue_limit = streams;
  fs::Engine engine(model, o);
  RunResult r;
  r.replies.resize(size_t(streams));
  std::mutex mu;
  std::vector<std::promise<void>> done(static_cast<size_t>(streams));
  auto t0 = Clock::now();
  Clock::time_point first{}, last{};
  for (int i = 0; i < streams; ++i) {
    fs::GenerationRequest req;
    req.prompt = prompt_for(i, prompt_len, model.config().vocab_size);
    req.max_tokens = max_tokens;
    req.sampling.temperature = 0;
    req.on_token = [&, i](const fs::SampledToken& t) {
      std::lock_guard lock(mu);
      auto now = Clock::now();
      if (first == Clock::time_point{}) first = now;
      last = now;
      r.replies[size_t(i)].push_back(t.id);
      return true;
    };
    req.on_done = [&, i](const fs::GenerationResult&) { done[size_t(i)].set_value(); };
    if (!engine.submit(std::move(req))) throw fs::Error("queue full");
  }
  for (auto& d : done) d.get_future().wait();
  r.wall = seconds(t0, Clock::now());
  r.first_token = seconds(t0, first);
  r.last_token = seconds(t0, last);
  return r;
}

std::string sha_of(const std::vector<std::vector<int32_t>>& replies, size_t count) {
  fs::Sha256 h;
  for (size_t i = 0; i < count && i < replies.size(); ++i)
    h.update(replies[i].data(), replies[i].size() * sizeof(int32_t));
  return fs::Sha256::hex(h.finish()).substr(0, 16);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> argv_s(argv + 1, argv + argc);
    fs::cli::Args args(argv_s, {"device", "streams", "prompt-tokens", "max-tokens", "prefill-tokens", "threads"}, {});
    if (auto t = args.get("threads")) setenv("FOLDSERVE_THREADS", t->c_str(), 1);
    std::filesystem::path dir = args.positionals().empty() ? "" : args.positionals()[0];
    auto m = fs::load_model(dir, {}, args.get_or("device", "cpu"));
    const int prompt_len = int(args.get_int("prompt-tokens", 16));
    const int max_tokens = int(args.get_int("max-tokens", 128));
    const int prefill_len = int(args.get_int("prefill-tokens", 512));
    std::vector<int32_t> counts = fs::cli::parse_id_list(args.get_or("streams", "1,2,4,8,16"));
    const double rate = copy_rate();
    const double weights = double(m->model->weight_bytes());
    std::printf("model %s  device %s  threads %d  weights %.1f MB\n", m->name.c_str(), m->model->device_name(),
                fs::ThreadPool::global().size(), weights / 1e6);
    std::printf("copy rate %.2f GB/s  bandwidth floor %.1f tok/s (weights / copy rate)\n", rate / 1e9,
                rate / weights);

    auto solo = run_streams(*m->model, 1, prompt_len, max_tokens, 256);
    double decode = double(solo.replies[0].size() - 1) / (solo.last_token - solo.first_token);
    std::printf("batch-1 decode  %.1f tok/s  fraction of floor %.2f  token_sha256 %s\n", decode,
                decode / (rate / weights), sha_of(solo.replies, 1).c_str());

    auto pre = run_streams(*m->model, 1, prefill_len, 1, prefill_len);
    std::printf("prefill %d tokens  %.1f tok/s (time to first token %.3f s)\n", prefill_len,
                prefill_len / pre.first_token, pre.first_token);

    for (int32_t n : counts) {
      auto r = run_streams(*m->model, n, prompt_len, max_tokens, 256);
      size_t total = 0;
      for (auto& rep : r.replies) total += rep.size();
      std::printf("streams %3d  aggregate %.1f tok/s  per stream %.1f tok/s  token_sha256 first %s all %s\n", n,
                  double(total) / r.wall, double(total) / r.wall / n, sha_of(r.replies, 1).c_str(),
                  sha_of(r.replies, size_t(n)).c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_engine: %s\n", e.what());
    return 1;
  }
}

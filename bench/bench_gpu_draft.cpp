// Speculative decoding on one GPU, on synthetic weights of real shapes (no checkpoint on disk): the cost of a draft
// model's guesses per drafted token (a Llama-3.2-1B-shaped drafter for a Llama-3-8B-shaped target by default) at 1, 8
// and 32 streams against the target's decode round of as many rows, then the engine on a repetitive prompt (a block of
// ids said over and over, as code repeats its lines) undrafted and with n-gram drafting: tok/s, acceptance and the
// token_sha256 of both replies (equal: drafting changes no bit).
// Usage: bench_gpu_draft [--target NAME] [--drafter NAME] [--draft-tokens K] [--reply N] [--block N] [--repeats N]
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "bench_main.h"
#include "core/error.h"

#ifdef FOLDSERVE_WITH_CUDA
#include "backends/cuda/kernels/cuda_model.h"
#include "core/sha256.h"
#include "engine/drafters/model_drafter.h"
#include "engine/drafters/ngram_drafter.h"
#include "engine/engine.h"
#include "models/kv_pool.h"
#include "synthetic_preset.h"

namespace fs {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr int kContext = 512;  // positions every measured stream holds before its timed steps

std::vector<int32_t> random_ids(std::mt19937& rng, int n, int vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng);
  return ids;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The target's decode round of `streams` rows after kContext positions each, every row picked on the device: median
// of 21 timed rounds.
double target_round(Model& model, int streams, std::mt19937& rng) {
  const int per = (kContext + 32) / 16 + 1;
  KvPool pool(model.memory_spec(), 16, streams * per, 0, model.kv_on_host());
  model.attach_pool(pool);
  std::vector<std::vector<int32_t>> pages(static_cast<size_t>(streams));
  for (auto& p : pages) {
    for (int i = 0; i < per; ++i) p.push_back(*pool.allocate());
    const auto prompt = random_ids(rng, kContext, model.config().vocab_size);
    SequenceChunk c{prompt, 0, p};
    c.prompt = true;
    (void)model.forward(std::span<const SequenceChunk>(&c, 1), pool);
  }
  const auto ids = random_ids(rng, streams, model.config().vocab_size);
  std::vector<SequenceChunk> chunks;
  for (int s = 0; s < streams; ++s) chunks.push_back({std::span<const int32_t>(&ids[size_t(s)], 1), kContext, pages[size_t(s)]});
  std::vector<RowSampling> greedy(static_cast<size_t>(streams));
  for (auto& g : greedy) g.mode = RowSampling::Mode::Greedy;
  std::vector<double> times;
  for (int i = 0; i < 24; ++i) {
    const auto t = Clock::now();
    (void)model.forward_sampled(chunks, greedy, pool);
    if (i >= 3) times.push_back(seconds_since(t));
  }
  return median(times);
}

// A drafting round of `streams` streams, K guesses each, after each stream kept one new token (every earlier guess
// rejected, so the drafter rolls back and catches up one row): median of 21 timed rounds.
double drafter_round(ModelDrafter& drafter, int streams, int k, std::mt19937& rng, uint64_t first_stream) {
  const int vocab = drafter.model().config().vocab_size;
  std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(streams));
  for (auto& t : tokens) t = random_ids(rng, kContext, vocab);
  auto requests = [&] {
    std::vector<DraftRequest> r;
    for (int s = 0; s < streams; ++s) r.push_back({first_stream + uint64_t(s), tokens[size_t(s)], k, 1});
    return r;
  };
  (void)drafter.propose(requests());  // catches every stream up on its context
  std::vector<double> times;
  for (int i = 0; i < 24; ++i) {
    for (auto& t : tokens) t.push_back(random_ids(rng, 1, vocab)[0]);
    const auto r = requests();
    const auto t = Clock::now();
    const auto guesses = drafter.propose(r);
    if (i >= 3) times.push_back(seconds_since(t));
    for (const auto& g : guesses)
      if (int(g.size()) != k) throw Error("the drafter proposed " + std::to_string(g.size()) + " tokens, not " + std::to_string(k));
  }
  for (int s = 0; s < streams; ++s) drafter.forget(first_stream + uint64_t(s));
  return median(times);
}

struct Reply {
  double seconds = 0;  // from the first token to the last
  size_t tokens = 0;
  std::string sha;
  EngineStats stats;
};

// One greedy stream over `prompt` for `reply` tokens (no eos), drafted by `drafter` (none: undrafted).
Reply engine_reply(Model& model, const std::vector<int32_t>& prompt, int reply, std::shared_ptr<Drafter> drafter,
                   int k) {
  EngineOptions o;
  o.parallel = 1;
  o.context = int(prompt.size()) + reply + 16;
  o.drafter = std::move(drafter);
  o.draft_tokens = k;
  o.draft_round_rows = model.cheap_round_rows();
  Engine engine(model, o);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::vector<int32_t> ids;
  Clock::time_point first;
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = reply;
  r.sampling.temperature = 0.0f;
  r.on_token = [&](const SampledToken& t) {
    std::lock_guard lock(mu);
    if (ids.empty()) first = Clock::now();
    ids.push_back(t.id);
    return true;
  };
  r.on_done = [&](const GenerationResult&) {
    std::lock_guard lock(mu);
    done = true;
    cv.notify_all();
  };
  if (!engine.submit(std::move(r))) throw Error("the engine refused the benchmark stream");
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
  Reply out;
  out.seconds = seconds_since(first);
  out.tokens = ids.size();
  Sha256 sha;
  sha.update(ids.data(), ids.size() * sizeof(int32_t));
  out.sha = Sha256::hex(sha.finish());
  out.stats = engine.stats();
  return out;
}

int bench(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string target_name = "llama-3-8b", drafter_name = "llama-3.2-1b";
  int k = 4, reply = 256, block = 48, repeats = 10;
  for (size_t i = 0; i < args.size(); ++i) {
    auto next = [&] { return i + 1 < args.size() ? args[++i] : throw Error("missing value after " + args[i]); };
    if (args[i] == "--target") target_name = next();
    else if (args[i] == "--drafter") drafter_name = next();
    else if (args[i] == "--draft-tokens") k = std::stoi(next());
    else if (args[i] == "--reply") reply = std::stoi(next());
    else if (args[i] == "--block") block = std::stoi(next());
    else if (args[i] == "--repeats") repeats = std::stoi(next());
    else throw Error("unknown argument " + args[i]);
  }
  if (!cuda_device_available())
    throw Error("no CUDA device: bench_gpu_draft needs an NVIDIA GPU and its driver, and this machine shows none");
  const Synthetic t = synthetic_preset(target_name, 0), d = synthetic_preset(drafter_name, 0);
  if (t.config.vocab_size != d.config.vocab_size) throw Error("the target and the drafter have different vocabularies");
  auto target = create_synthetic_cuda_model(t.config, t.spread);
  auto draft_model = create_synthetic_cuda_model(d.config, d.spread);
  std::printf("target like %s (%.2f GB of bf16 matrices), drafter like %s (%.2f GB), synthetic weights on the device\n",
              target_name.c_str(), double(target->weight_bytes()) / 1e9, drafter_name.c_str(),
              double(draft_model->weight_bytes()) / 1e9);
  std::mt19937 rng(7);
  const int max_streams = 32;
  std::vector<double> draft_steps;  // the drafter model's own decode rounds, before ModelDrafter wraps it
  for (int streams : {1, 8, max_streams}) draft_steps.push_back(target_round(*draft_model, streams, rng));
  ModelDrafter drafter(std::move(draft_model), drafter_name, max_streams * ((kContext + 64) / 16 + 1));
  drafter.reserve(max_streams);
  std::printf("drafter cost: %d guesses a round after %d positions per stream (K forwards of one row per stream)\n", k,
              kContext);
  uint64_t next_stream = 1;
  const double floor = double(drafter.model().weight_bytes()) / double(target->weight_bytes());
  size_t at = 0;
  for (int streams : {1, 8, max_streams}) {
    const double round = target_round(*target, streams, rng);
    const double drafting = drafter_round(drafter, streams, k, rng, next_stream);
    next_stream += uint64_t(streams);
    std::printf("%2d streams: target round %.3f ms; drafter round %.3f ms (model alone); drafting %.3f ms a round, "
                "%.3f ms a drafted token = %.3f of a target round (weight bytes: %.3f)\n",
                streams, round * 1e3, draft_steps[at++] * 1e3, drafting * 1e3, drafting / k * 1e3,
                drafting / k / round, floor);
  }

  // A block of random ids said `repeats` times: n-grams of the prompt recur, as in code.
  const auto piece = random_ids(rng, block, t.config.vocab_size);
  std::vector<int32_t> prompt;
  for (int r = 0; r < repeats; ++r) prompt.insert(prompt.end(), piece.begin(), piece.end());
  (void)engine_reply(*target, prompt, 16, nullptr, k);  // warm-up
  const Reply plain = engine_reply(*target, prompt, reply, nullptr, k);
  const Reply ngram = engine_reply(*target, prompt, reply, std::make_shared<NgramDrafter>(), k);
  const auto& s = ngram.stats;
  const double plain_rate = double(plain.tokens) / plain.seconds, ngram_rate = double(ngram.tokens) / ngram.seconds;
  std::printf("repetitive prompt (%d ids x %d), %d greedy tokens, one stream:\n", block, repeats, reply);
  std::printf("  undrafted %.1f tok/s  token_sha256 %s\n", plain_rate, plain.sha.c_str());
  std::printf("  n-gram    %.1f tok/s  x%.2f  drafted %llu, accepted %llu (%.2f), %.2f kept per window  "
              "token_sha256 %s%s\n",
              ngram_rate, ngram_rate / plain_rate, (unsigned long long)s.drafted_tokens,
              (unsigned long long)s.accepted_tokens,
              s.drafted_tokens ? double(s.accepted_tokens) / double(s.drafted_tokens) : 0.0,
              s.draft_windows ? double(s.accepted_tokens) / double(s.draft_windows) : 0.0, ngram.sha.c_str(),
              ngram.sha == plain.sha ? "" : "  DIFFERS");
  return 0;
}

}  // namespace
}  // namespace fs

int main(int argc, char** argv) { return fs::run_bench("bench_gpu_draft", fs::bench, argc, argv); }
#else
int main() { return fs::no_cuda_backend("bench_gpu_draft"); }
#endif

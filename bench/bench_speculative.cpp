// Speculative decoding: fortune-demo (on --device, cpu by default) alone, with the fortune-draft model (on the same
// device: on the CPU on ModelDrafter's int8 weights and, as chains, on its own bf16 ones) and with n-gram drafting,
// each as chains and as trees (--draft-tree W), for 1 and 4 streams in one run; --prompt-file FILE replaces the
// reference prompts with that file's text (for example repetitive code, where n-grams find their matches); tok/s,
// acceptance, the ratio to undrafted, and the token_sha256 of every configuration's replies (equal when drafting
// changes no bit). Prints figures; never a test.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "cli/args.h"
#include "core/files.h"
#include "core/sha256.h"
#include "core/thread_pool.h"
#include "engine/drafters/load_drafter.h"
#include "engine/drafters/model_drafter.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "models/cpu_runner.h"
#include "models/kv_pool.h"
#include "bench_main.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Run {
  double seconds = 0;
  size_t tokens = 0;
  std::string sha;
  fs::EngineStats stats;
};

// `streams` requests over the prompts in turn, all submitted at once; greedy, no eos so every reply has max_tokens.
Run run(fs::Model& model, const std::vector<std::vector<int32_t>>& prompts, int streams, int max_tokens,
        std::shared_ptr<fs::Drafter> drafter, int draft_tokens, int draft_tree, int round_rows) {
  fs::EngineOptions o;
  o.parallel = streams;
  o.context = 1024;
  o.drafter = std::move(drafter);
  o.draft_tokens = draft_tokens;
  o.draft_tree = draft_tree;
  o.draft_round_rows = round_rows;
  fs::Engine engine(model, o);
  std::vector<std::vector<int32_t>> replies(static_cast<size_t>(streams));
  std::vector<std::promise<void>> done(static_cast<size_t>(streams));
  std::mutex mu;
  const auto t0 = Clock::now();
  for (int i = 0; i < streams; ++i) {
    fs::GenerationRequest req;
    req.prompt = prompts[size_t(i) % prompts.size()];
    req.max_tokens = max_tokens;
    req.sampling.temperature = 0.0f;
    req.on_token = [&, i](const fs::SampledToken& t) {
      std::lock_guard lock(mu);
      replies[size_t(i)].push_back(t.id);
      return true;
    };
    req.on_done = [&, i](const fs::GenerationResult&) { done[size_t(i)].set_value(); };
    engine.submit(std::move(req));
  }
  for (auto& d : done) d.get_future().wait();
  Run r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  fs::Sha256 sha;
  for (const auto& reply : replies) {
    r.tokens += reply.size();
    sha.update(reply.data(), reply.size() * sizeof(int32_t));
  }
  r.sha = fs::Sha256::hex(sha.finish()).substr(0, 16);
  r.stats = engine.stats();
  return r;
}

// Best-of-`reps` seconds of one forward over a window of `rows` rows of one stream after a 128-token prefix.
double window_seconds(fs::Model& model, int rows, int reps) {
  const int P = 16, positions = 128 + rows;
  fs::KvPool pool(model.memory_spec(), P, (positions + P - 1) / P, 0, model.kv_on_host());
  model.attach_pool(pool);
  std::vector<int32_t> pages, tokens(static_cast<size_t>(positions));
  for (int i = 0; i < (positions + P - 1) / P; ++i) pages.push_back(*pool.allocate());
  for (int i = 0; i < positions; ++i) tokens[size_t(i)] = int32_t((i * 7919 + 13) % model.config().vocab_size);
  fs::SequenceChunk prefix{std::span<const int32_t>(tokens.data(), 128), 0, pages, false};
  model.forward(std::span<const fs::SequenceChunk>(&prefix, 1), pool);
  fs::SequenceChunk window{std::span<const int32_t>(tokens.data() + 128, size_t(rows)), 128, pages, true};
  double best = 1e9;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    model.forward(std::span<const fs::SequenceChunk>(&window, 1), pool);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

int bench(int argc, char** argv) {
  std::vector<std::string> argv_s(argv + 1, argv + argc);
  const std::string shared = std::string(FOLDSERVE_SOURCE_DIR) + "/../shared";
  fs::cli::Args args(argv_s, {"model", "drafter", "cases", "max-tokens", "draft-tokens", "draft-tree", "draft-round-rows", "threads", "reps",
                        "device", "streams", "kinds", "prompt-file"}, {});
  if (auto t = args.get("threads")) setenv("FOLDSERVE_THREADS", t->c_str(), 1);
  const std::string device = args.get_or("device", "cpu");
  auto target = fs::load_model(args.get_or("model", shared + "/models/fortune-demo"), {}, device);
  const std::string drafter_dir = args.get_or("drafter", shared + "/models/fortune-draft");
  const int max_tokens = int(args.get_int("max-tokens", 128));
  const int k = int(args.get_int("draft-tokens", fs::EngineOptions{}.draft_tokens));
  const int w = int(args.get_int("draft-tree", 2));
  const int round_rows = int(args.get_int("draft-round-rows", target->model->cheap_round_rows()));
  std::vector<std::vector<int32_t>> prompts;
  if (auto file = args.get("prompt-file")) {
    prompts = {target->tokenizer->encode(fs::read_file(*file), true)};
    std::printf("prompt: %s, %zu tokens\n", file->c_str(), prompts[0].size());
  } else {
    const auto cases = fs::read_json_file(args.get_or("cases", shared + "/reference/fortune-demo/cases.json"));
    for (const auto& c : cases["cases"]) prompts.push_back(c["ids"].get<std::vector<int32_t>>());
  }
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("load average %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  std::printf("target %s on %s  drafter %s  threads %d  max_tokens %d  draft_tokens %d  draft_tree %d  "
              "draft_round_rows %d%s\n",
              target->name.c_str(), device.c_str(), drafter_dir.c_str(), fs::ThreadPool::global().size(), max_tokens,
              k, w, round_rows,
              target->model->supports_row_parents() ? "" : " (the target has no row parents: trees run as chains)");
  const int reps = int(args.get_int("reps", 5));
  auto draft_model = fs::load_model(drafter_dir, {}, device);
  fs::quantize_for_drafting(*draft_model->model);  // as ModelDrafter runs it (the CPU only)
  // Forward costs, each the best of rounds that take every size in turn.
  std::vector<std::pair<fs::Model*, int>> windows{{draft_model->model.get(), 1}};
  for (int rows : {1, 2, 3, 4, 5, 8, 16, 1 + 2 * k, 1 + 3 * k}) windows.push_back({target->model.get(), rows});
  std::vector<double> cost(windows.size(), 1e9);
  for (int round = 0; round < 7; ++round)
    for (size_t i = 0; i < windows.size(); ++i)
      cost[i] = std::min(cost[i], window_seconds(*windows[i].first, windows[i].second, 3));
  const double one_row = cost[1];
  std::printf("target one-row step %.3f ms; drafter one-row step %.3f ms (%.2f of it)\n", one_row * 1e3,
              cost[0] * 1e3, cost[0] / one_row);
  for (size_t i = 2; i < windows.size(); ++i)
    std::printf("target %s window of %2d rows: %.2f x a one-row step\n", i + 2 < windows.size() ? "verify" : "tree",
                windows[i].second, cost[i] / one_row);
  run(*target->model, prompts, 1, 16, nullptr, k, 1, round_rows);  // warm-up
  // Configurations interleaved `reps` times, best of each: the machine's other load hits them alike.
  // --streams N runs only N streams; --kinds N only the first N configurations (3: undrafted, fortune-draft on int8
  // weights and on bf16).
  const int only_streams = int(args.get_int("streams", 0));
  const size_t kind_count = size_t(std::max<long long>(1, args.get_int("kinds", 5)));
  for (int streams : {1, 4}) {
    if (only_streams > 0 && streams != only_streams) continue;
    struct Kind {
      std::string drafter;
      int tree;
      bool bf16 = false;  // the drafter on its own bf16 weights instead of ModelDrafter's int8 copies
    };
    std::vector<Kind> kinds = {{"", 1}, {drafter_dir, 1}, {drafter_dir, 1, true}, {drafter_dir, w}, {"ngram", 1},
                               {"ngram", w}};
    kinds.resize(std::min(kinds.size(), kind_count));
    std::vector<Run> best(kinds.size());
    for (int r = 0; r < reps; ++r)
      for (size_t c = 0; c < kinds.size(); ++c) {
        const Kind& kind = kinds[c];
        std::shared_ptr<fs::Drafter> drafter;
        if (kind.bf16) {
          auto m = fs::load_model(kind.drafter, {}, device);
          drafter = std::make_shared<fs::ModelDrafter>(std::move(m->model), m->name, streams * 65, false);
        } else if (!kind.drafter.empty()) {
          drafter = fs::load_drafter(kind.drafter, *target, streams, 1024);
        }
        Run x = run(*target->model, prompts, streams, max_tokens, drafter, k, kind.tree, round_rows);
        if (r == 0 || x.seconds < best[c].seconds) best[c] = x;
      }
    const Run& base = best[0];
    const double base_rate = double(base.tokens) / base.seconds;
    std::printf("streams %d  undrafted            %7.1f tok/s                                      token_sha256 %s\n",
                streams, base_rate, base.sha.c_str());
    for (size_t c = 1; c < kinds.size(); ++c) {
      const Kind& kind = kinds[c];
      const Run& d = best[c];
      const double rate = double(d.tokens) / d.seconds;
      const auto& s = d.stats;
      const std::string label = std::string(kind.drafter == "ngram" ? "ngram" : "fortune-draft") +
                                (kind.tree > 1 ? " tree " + std::to_string(kind.tree) : "") + (kind.bf16 ? " bf16" : "");
      std::printf("streams %d  %-20s %7.1f tok/s  x%.2f  acceptance %.2f  kept/window %.2f  token_sha256 %s%s\n",
                  streams, label.c_str(), rate, rate / base_rate,
                  s.drafted_tokens ? double(s.accepted_tokens) / double(s.drafted_tokens) : 0.0,
                  s.draft_windows ? double(s.accepted_tokens) / double(s.draft_windows) : 0.0, d.sha.c_str(),
                  d.sha == base.sha ? "" : "  DIFFERS");
    }
  }
  getloadavg(load, 3);
  std::printf("load average %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return fs::run_bench("bench_speculative", bench, argc, argv); }

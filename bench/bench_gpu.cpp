// GPU benchmark in one run: device copy bandwidth, batch-1 decode tok/s against the weight-streaming floor,
// prefill tok/s, and aggregate decode tok/s of an engine at 1..64 streams with the token_sha256 of each run.
// Usage: bench_gpu CHECKPOINT [--decode N] [--prefill N] [--stream-prompt N] [--reply N] [--max-streams N]
//        [--round-tokens N] [--prefill-chunk N]   the engine runs' round and prompt-chunk sizes (default: 2048 or
//                                                 twice the streams, and 512)
//        [--prefill-first]   the engine runs prefill every prompt before decoding (EngineOptions::prefill_first)
//        [--rounds-only: only the model's decode rounds of --max-streams rows, for a profiler]
//        [--host-profile FILE: the host threads sampled during the largest engine run (bench/host_profile.h)]
//        [--round-log FILE: one line per round of the largest engine run: rows, decode rows, prompt rows, chunks,
//                           forward ms]
//        bench_gpu --make-like NAME [--layers N] OUT   (writes the random checkpoint first, then measures it)
//        bench_gpu --synthetic NAME [--layers N]   (a preset's shape with random weights made on the device)
//        --tensor-parallel N   the model split over GPUs 0..N-1 (figures per GPU: weights, floor), then one batch-1
//                              decode step's all-reduces timed, the whole model's step on GPU 0 and the TP step
//                              against its limit (TP = 1 step / N + the all-reduces)
//        --gemm-rows 1,16,64|none   row counts of the GEMM table
//        --gemm-shapes qkv,o,...   only these shapes of the GEMM table (default: all)
//        bench_gpu --gemm-only [--gemm-rows ...]   the copy bandwidth and the GEMM table alone (no checkpoint)
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bench_main.h"
#include "core/error.h"
#include "core/sha256.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "models/checkpoint_maker.h"
#include "models/kv_pool.h"
#include "models/model.h"
#include "models/model_program.h"
#include "models/tensor_parallel_plan.h"

#ifdef FOLDSERVE_WITH_CUDA
#include "allreduce_timing.h"
#include "backends/cuda/host/check.h"
#include "backends/cuda/host/device.h"
#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/round_collectives.h"
#include "backends/cuda/host/stream.h"
#include "backends/cuda/kernels/cuda_model.h"
#include "backends/cuda/kernels/fill_ops.h"
#include "backends/cuda/kernels/tensor_parallel_model.h"
#include "backends/cuda/kernels/ops.h"
#include "gemm_peer.h"
#include "host_profile.h"
#include "synthetic_preset.h"

namespace fs {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Device-to-device copy rate, counting bytes read plus bytes written.
double copy_bandwidth() {
  cuda::Device device(0);
  cuda::Stream stream;
  const size_t bytes = size_t{2} << 30;
  cuda::DeviceArena arena(2 * bytes + 4096, "copy benchmark");
  auto a = arena.allocate(bytes, "source"), b = arena.allocate(bytes, "destination");
  FS_CU(memset_d8_async, a.ptr, 0x5a, bytes, stream.handle());
  for (int i = 0; i < 2; ++i) FS_CU(memcpy_dtod_async, b.ptr, a.ptr, bytes, stream.handle());
  stream.synchronize();
  const int reps = 20;
  auto t = Clock::now();
  for (int i = 0; i < reps; ++i) FS_CU(memcpy_dtod_async, b.ptr, a.ptr, bytes, stream.handle());
  stream.synchronize();
  return 2.0 * double(bytes) * reps / seconds_since(t);
}

struct GemmShape {
  const char* name;
  int n, k;
};
// The GEMM table's shapes. *27: Qwen3.5-27B's DeltaNet qkv|z|b|a and out, gate|up and down (hidden 5120, ffn 17408);
// both gate|up shapes also run with the SwiGLU epilogue.
constexpr GemmShape kGemmShapes[] = {{"qkv", 6144, 4096},       {"o", 4096, 4096},          {"gate_up", 28672, 4096},
                                     {"down", 4096, 14336},     {"lm_head", 128256, 4096}, {"in27", 16480, 5120},
                                     {"out27", 5120, 6144},     {"gate_up27", 34816, 5120}, {"down27", 5120, 17408}};

// "a,b" → {"a", "b"}.
std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> items;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    items.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return items;
}

// "qkv,o" → {"qkv", "o"}, each a shape of the table.
std::vector<std::string> gemm_shape_names(const std::string& list) {
  std::vector<std::string> names = split_commas(list);
  for (const std::string& name : names)
    if (std::none_of(std::begin(kGemmShapes), std::end(kGemmShapes),
                     [&](const GemmShape& s) { return name == s.name; }))
      throw Error("no GEMM shape named '" + name + "'");
  return names;
}

// Shared GEMM on the decoder's shapes (hidden 4096, ffn 14336, 8 kv heads of 128, vocabulary 128256): time per
// call and the rate of the bytes it must move (weights + inputs + outputs) and of its arithmetic, for `gemm` and
// every variant, beside cuBLASLt on the same shape: each rate as a fraction of the copy bandwidth `bw` (floor) and
// of cuBLASLt's. Weight buffers rotate so the L2 cache never holds them; weights and inputs are random, as a model's
// are (constant operands flip fewer bits in the tensor cores and draw less power).
void gemm_rates(const std::vector<int>& rows, const std::vector<std::string>& only, double bw) {
  cuda::Device device(0);
  cuda::Stream stream;
  const int max_k = 17408;  // the longest k of the shapes
  const int copies = 4, max_m = std::max(2048, *std::max_element(rows.begin(), rows.end()));
  const size_t wbytes = size_t{128256} * 4096 * 2;
  cuda::DeviceArena arena(copies * wbytes + size_t(max_m) * max_k * 2 + size_t(max_m) * 128256 * 4 + 65536,
                          "gemm benchmark");
  auto ptr = [](const cuda::DeviceSpan& s) { return reinterpret_cast<uint16_t*>(s.ptr); };
  std::vector<cuda::DeviceSpan> w;
  for (int i = 0; i < copies; ++i) {
    w.push_back(arena.allocate(wbytes, "weights"));
    cuda::kernels::fill_uniform_bf16(ptr(w.back()), wbytes / 2, 10 + uint64_t(i), 0.05f, 0.0f, stream.handle());
  }
  auto x = arena.allocate(size_t(max_m) * max_k * 2, "inputs");
  auto y = arena.allocate(size_t(max_m) * 128256 * 4, "outputs");
  cuda::kernels::fill_uniform_bf16(ptr(x), size_t(max_m) * max_k, 9, 1.0f, 0.0f, stream.handle());
  GemmPeer peer;
  std::vector<cuda::CUdeviceptr> weights;
  for (const auto& c : w) weights.push_back(c.ptr);
  std::printf("%8s %6s %10s %10s %10s %7s %9s  %s\n", "gemm", "m", "us", "GB/s", "TFLOP/s", "floor", "cuBLASLt",
              "variant");
  auto print = [&](const GemmShape& s, int m, double sec, std::optional<double> peer_sec, const std::string& name,
                   bool swiglu = false) {
    const double bytes = 2.0 * s.n * s.k + 2.0 * m * s.k + (swiglu ? 1.0 : 4.0) * m * s.n;
    char of_peer[16] = "n/a";
    if (peer_sec) std::snprintf(of_peer, sizeof of_peer, "%.2f", *peer_sec / sec);
    std::printf("%8s %6d %10.1f %10.0f %10.1f %7.2f %9s  %s\n", s.name, m, sec * 1e6, bytes / sec / 1e9,
                2.0 * m * s.n * s.k / sec / 1e12, bytes / sec / bw, of_peer, name.c_str());
    std::fflush(stdout);
  };
  void* st = reinterpret_cast<void*>(stream.handle());
  // Mean seconds of call(i) over 8 (2048+ rows) or 40 calls after one call on each weight copy.
  auto mean_seconds = [&](int m, const auto& call) {
    for (int i = 0; i < copies; ++i) call(i);
    stream.synchronize();
    const int reps = m >= 2048 ? 8 : 40;
    auto t = Clock::now();
    for (int i = 0; i < reps; ++i) call(i);
    stream.synchronize();
    return seconds_since(t) / reps;
  };
  for (int m : rows)
    for (const GemmShape& s : kGemmShapes) {
      if (m > 64 && std::strcmp(s.name, "lm_head") == 0) continue;  // the lm head matters for decode rows only
      if (!only.empty() && std::find(only.begin(), only.end(), s.name) == only.end()) continue;
      const auto peer_sec = peer.seconds(x.ptr, weights, y.ptr, m, s.n, s.k, m >= 2048 ? 8 : 40, stream.handle());
      if (peer_sec) print(s, m, *peer_sec, peer_sec, "cuBLASLt (bf16 in, f32 out, no split-K)");
      for (int v = -1; v < cuda::kernels::gemm_variants(); ++v) {
        // The weights-as-A wgmma kernels are for few rows.
        const char* name = v >= 0 ? cuda::kernels::gemm_variant_name(v) : "";
        const bool few_rows = v >= 0 && std::string_view(name).starts_with("wgmma rows");
        if (m > 64 && few_rows) continue;
        auto* out = reinterpret_cast<float*>(y.ptr);
        const double sec = mean_seconds(m, [&](int i) {
          if (v < 0) cuda::kernels::gemm(ptr(x), ptr(w[i % copies]), nullptr, out, m, s.n, s.k, false, st);
          else cuda::kernels::gemm_variant(v, ptr(x), ptr(w[i % copies]), nullptr, out, m, s.n, s.k, false, st);
        });
        const int picked = cuda::kernels::gemm_picked_variant(m, s.n, s.k);
        print(s, m, sec, peer_sec,
              v < 0 ? "default (" + std::to_string(picked) + ")" : std::to_string(v) + " " + name);
        if (v >= 0) continue;
        // The same call on f16 halves (the layers' normed-input GEMMs): the same kernel, another operand type.
        const double f16_sec = mean_seconds(m, [&](int i) {
          cuda::kernels::gemm(ptr(x), ptr(w[i % copies]), nullptr, out, m, s.n, s.k, false, st,
                              cuda::kernels::HalfType::f16);
        });
        print(s, m, f16_sec, peer_sec, "default on f16 halves");
      }
      if (std::string_view(s.name).starts_with("gate_up")) {
        const double sec = mean_seconds(m, [&](int i) {
          cuda::kernels::gemm_swiglu(ptr(x), ptr(w[i % copies]), ptr(y), m, s.n / 2, s.k, st);
        });
        print(s, m, sec, peer_sec, "default with the SwiGLU epilogue (bf16 [m, n/2] out)", true);
      }
    }
}

std::vector<int32_t> random_ids(std::mt19937& rng, int n, int vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng);
  return ids;
}

// One stream driven directly: its pages and, for models with recurrent layers, its state slot.
struct Direct {
  Model& model;
  KvPool pool;
  std::vector<int32_t> pages;
  int32_t slot = -1;
  Direct(Model& m, int positions) : model(m), pool(m.memory_spec(), 16, positions / 16 + 1, 1, false) {
    model.attach_pool(pool);
    for (int i = 0; i < positions / 16 + 1; ++i) pages.push_back(*pool.allocate());
    if (m.memory_spec().has_state()) slot = *pool.allocate_state();
  }
  // `ids` from position `start`: prompt rows (the model may give them an arithmetic of their own) or decode rows.
  std::vector<float> run(const std::vector<int32_t>& ids, int start, bool prompt) {
    SequenceChunk c{ids, start, pages};
    c.state_slot = slot;
    c.prompt = prompt;
    return model.forward(std::span<const SequenceChunk>(&c, 1), pool);
  }
};

// The cost of a speculative verify window: one forward over R rows of one stream after a 512-token context, every
// row picked greedily on the device, against a one-row step (median of 21 calls each).
void verify_windows(Model& model, std::mt19937& rng) {
  const int context = 512;
  Direct d(model, context + 32);
  d.run(random_ids(rng, context, model.config().vocab_size), 0, true);
  double one_row = 0;
  for (int rows : {1, 2, 4, 8, 16}) {
    const auto ids = random_ids(rng, rows, model.config().vocab_size);
    SequenceChunk c{ids, context, d.pages};
    c.all_logits = true;
    c.state_slot = d.slot;
    std::vector<RowSampling> greedy(static_cast<size_t>(rows), RowSampling{});
    for (auto& g : greedy) g.mode = RowSampling::Mode::Greedy;
    std::vector<double> times;
    for (int i = 0; i < 24; ++i) {
      auto s = Clock::now();
      (void)model.forward_sampled(std::span<const SequenceChunk>(&c, 1), greedy, d.pool);
      if (i >= 3) times.push_back(seconds_since(s));
    }
    std::sort(times.begin(), times.end());
    const double t = times[times.size() / 2];
    if (rows == 1) one_row = t;
    std::printf("verify window of %2d rows: %.3f ms, %.2fx a one-row step\n", rows, t * 1e3, t / one_row);
  }
}

// The model's own cost of a decode round: N sequences after a 512-token prompt each, one row per sequence, every row
// picked greedily on the device (forward_sampled, as the engine calls it), median of 21 rounds; the engine's decode
// rate at N streams beside it shows what the engine adds per round.
void decode_rounds(Model& model, std::mt19937& rng, int max_rows, bool only_largest = false, int steps = 24) {
  const int context = 512;
  for (int rows = only_largest ? max_rows : 1; rows <= max_rows; rows *= 4) {
    const int per = (context + steps) / 16 + 1;
    KvPool pool(model.memory_spec(), 16, rows * per, rows, false);
    model.attach_pool(pool);
    std::vector<std::vector<int32_t>> pages(static_cast<size_t>(rows));
    std::vector<int32_t> slots(static_cast<size_t>(rows), -1);
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < per; ++i) pages[size_t(r)].push_back(*pool.allocate());
      if (model.memory_spec().has_state()) slots[size_t(r)] = *pool.allocate_state();
      SequenceChunk c{random_ids(rng, context, model.config().vocab_size), 0, pages[size_t(r)]};
      c.state_slot = slots[size_t(r)];
      c.prompt = true;
      (void)model.forward(std::span<const SequenceChunk>(&c, 1), pool);
    }
    std::vector<RowSampling> greedy(static_cast<size_t>(rows), RowSampling{});
    for (auto& g : greedy) g.mode = RowSampling::Mode::Greedy;
    std::vector<std::vector<int32_t>> next(static_cast<size_t>(rows), std::vector<int32_t>{1});
    std::vector<double> times;
    for (int i = 0; i < steps; ++i) {
      std::vector<SequenceChunk> chunks;
      for (int r = 0; r < rows; ++r) {
        chunks.push_back(SequenceChunk{next[size_t(r)], context + i, pages[size_t(r)]});
        chunks.back().state_slot = slots[size_t(r)];
      }
      auto s = Clock::now();
      const SampledForward out = model.forward_sampled(chunks, greedy, pool);
      if (i >= 3) times.push_back(seconds_since(s));
      for (int r = 0; r < rows && r < int(out.ids.size()); ++r) next[size_t(r)] = {out.ids[size_t(r)]};
    }
    std::sort(times.begin(), times.end());
    const double t = times[times.size() / 2];
    std::printf("decode round of %2d rows after %d keys (model alone): %.3f ms, %.0f tok/s\n", rows, context, t * 1e3,
                rows / t);
  }
}

// The id of a logits row's largest value (the lowest among ties).
int32_t argmax(const std::vector<float>& logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// Batch-1 greedy decode by direct forward calls: a 32-token prompt from `rng`, 8 warm-up steps, then `steps` timed
// ones; seconds per timed step and the sha256 of every id. Each step's id is picked as the engine picks it
// (forward_sampled, greedy: on the device where the model samples there), or with `host_pick` from the whole
// logits row brought to the host.
struct Batch1Decode {
  double step_seconds = 0;
  std::string sha;
};

Batch1Decode batch1_decode(Model& model, std::mt19937& rng, int steps, bool host_pick = false) {
  Direct d(model, 64 + steps + 16);
  auto ids = random_ids(rng, 32, model.config().vocab_size);
  int32_t id = argmax(d.run(ids, 0, true));
  int pos = int(ids.size());
  std::vector<RowSampling> greedy(1);
  greedy[0].mode = RowSampling::Mode::Greedy;
  Sha256 sha;
  Clock::time_point s;
  for (int i = 0; i < steps + 8; ++i) {
    if (i == 8) s = Clock::now();  // the first steps warm up
    sha.update(&id, sizeof id);
    if (host_pick) {
      id = argmax(d.run({id}, pos++, false));
      continue;
    }
    const std::vector<int32_t> token{id};
    SequenceChunk c{token, pos++, d.pages};
    c.state_slot = d.slot;
    const SampledForward out = model.forward_sampled(std::span<const SequenceChunk>(&c, 1), greedy, d.pool);
    // A model that samples on the host gives the row back as logits.
    id = out.ids.at(0) >= 0 ? out.ids[0] : argmax(out.logits);
  }
  return {seconds_since(s) / steps, Sha256::hex(sha.finish())};
}

// The model over GPUs 0 .. ranks − 1 (the whole model on GPU 0 when ranks is 1): weights from the checkpoint, or
// made on the devices from `spread` when there is no checkpoint.
std::unique_ptr<Model> make_model(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint,
                                  const cuda::SyntheticSpread* spread, int ranks) {
  if (ranks > 1) return create_tensor_parallel_model(config, std::move(checkpoint), ranks, spread);
  return checkpoint ? create_cuda_model(config, std::move(checkpoint)) : create_synthetic_cuda_model(config, *spread);
}

// The (preset's or checkpoint's) model measured at TP = N, and the batch-1 step it took.
struct TensorParallelRun {
  const ModelConfig& config;
  std::shared_ptr<Checkpoint> checkpoint;  // null with synthetic weights
  const cuda::SyntheticSpread* spread;     // null with a checkpoint
  int ranks;
  double step_seconds;
  std::mt19937 decode_rng;  // as the TP batch-1 decode found it, so TP = 1 decodes the same prompt
  int decode_steps;
};

// The all-reduces of one batch-1 decode round on a rank, as the CUDA runner issues them (round_collectives): their
// number, the f32 of each, and the f32 each rank sends in the head's all-gather.
struct DecodeAllReduces {
  int messages = 0;
  size_t floats = 0;
  size_t head_gather_floats = 0;
};

DecodeAllReduces decode_all_reduces(const TensorParallelRun& run) {
  const ModelProgram program = model_program(run.config, run.checkpoint.get());
  const ModelProgram rank0 = shard_program(program, tensor_parallel_plan(program, run.ranks), 0);
  const cuda::RoundShape one_row{int(rank0.layers.size()), run.config.hidden_size, 1, 1, rank0.head.rows()};
  DecodeAllReduces out;
  for (const cuda::RoundCollective& c : cuda::round_collectives(one_row)) {
    if (c.gather) {
      out.head_gather_floats += c.count;
      continue;
    }
    if (out.messages > 0 && c.count != out.floats)
      throw Error("the all-reduce timing takes messages of one size, and " + cuda::describe(c) + " differs from " +
                  std::to_string(out.floats) + " floats");
    out.floats = c.count;
    ++out.messages;
  }
  return out;
}

// The whole model's batch-1 decode on GPU 0 (the same prompt as the TP run), or why it was not measured: the runner
// refuses a model that does not fit the GPU's free memory, naming the numbers.
struct WholeModelStep {
  std::optional<Batch1Decode> decode;
  std::string why_not;
};

WholeModelStep whole_model_step(const TensorParallelRun& run) {
  std::mt19937 rng = run.decode_rng;
  try {
    auto model = make_model(run.config, run.checkpoint, run.spread, 1);
    return {batch1_decode(*model, rng, run.decode_steps), ""};
  } catch (const Error& e) {
    return {std::nullopt, e.what()};
  }
}

constexpr int kAllReduceSteps = 200;

// Batch-1 decode at TP = N against its limit, TP = 1 step / N + the step's all-reduces (fixed-order, replayed from a
// CUDA graph), each measured in this run; the head's all-gather is not timed.
void report_tensor_parallel_limit(const TensorParallelRun& run) {
  const DecodeAllReduces plan = decode_all_reduces(run);
  const AllReduceStepSeconds all_reduce =
      fixed_order_step_seconds(run.ranks, plan.floats, plan.messages, kAllReduceSteps);
  std::printf("tensor parallel %d, one batch-1 decode step's all-reduces (round_collectives: the embedding's, then "
              "one after each layer's mixer and FFN): %d messages of %zu f32, fixed-order, %d steps: %.3f ms "
              "replayed from a CUDA graph, %.3f ms eager; the head's all-gather (%zu f32 per GPU) not timed\n",
              run.ranks, plan.messages, plan.floats, kAllReduceSteps, all_reduce.graph * 1e3, all_reduce.eager * 1e3,
              plan.head_gather_floats);
  std::fflush(stdout);
  const WholeModelStep whole = whole_model_step(run);
  const double tp_ms = run.step_seconds * 1e3, all_reduce_ms = all_reduce.graph * 1e3;
  if (!whole.decode) {
    std::printf("tensor parallel 1 (the whole model on GPU 0): not measured (%s)\n", whole.why_not.c_str());
    std::printf("tensor parallel %d: step %.2f ms; no limit without the TP = 1 step; all-reduce %.2f ms (%d messages "
                "of %zu f32, graph)\n",
                run.ranks, tp_ms, all_reduce_ms, plan.messages, plan.floats);
    return;
  }
  const double tp1_ms = whole.decode->step_seconds * 1e3, limit_ms = tp1_ms / run.ranks + all_reduce_ms;
  std::printf("tensor parallel 1 (the whole model on GPU 0): batch-1 decode %.1f tok/s (%.2f ms/token); "
              "token_sha256 %s\n",
              1e3 / tp1_ms, tp1_ms, whole.decode->sha.c_str());
  std::printf("tensor parallel %d: step %.2f ms; limit %.2f ms = TP1 step %.2f ms / %d + all-reduce %.2f ms (%d "
              "messages of %zu f32, graph); %.2fx the limit\n",
              run.ranks, tp_ms, limit_ms, tp1_ms, run.ranks, all_reduce_ms, plan.messages, plan.floats,
              tp_ms / limit_ms);
}

// One engine run of N greedy streams: the decode rate once every stream has its first token (tokens after that
// moment / time to the last finish), the whole rate (all tokens / wall time from first submit, prefill included),
// and the sha256 of every reply's ids in request order.
struct EngineRun {
  double decode_rate = 0, whole_rate = 0;
  std::string sha;
};

// The engine runs' workload, round sizes and order; round_tokens 0: 2048 or twice the streams, whichever is more.
struct EngineLoad {
  int prompt = 512, reply = 128, round_tokens = 0, prefill_chunk = 512;
  bool prefill_first = false;
};

// `round_log`: where each round's record goes, one line each (null: nowhere).
EngineRun engine_run(Model& model, int streams, const EngineLoad& load, std::FILE* round_log = nullptr) {
  const int prompt = load.prompt, reply = load.reply;
  EngineOptions o;
  o.parallel = streams;
  o.context = prompt + reply + 16;
  o.prefill_chunk = load.prefill_chunk;
  o.round_tokens = load.round_tokens > 0 ? load.round_tokens : std::max(2048, streams * 2);
  o.prefill_first = load.prefill_first;
  o.queue_limit = streams;
  if (round_log)
    o.on_round = [round_log](const RoundRecord& r) {
      std::fprintf(round_log, "%d %d %d %d %.3f\n", r.rows, r.decode_rows, r.prompt_rows, r.chunks,
                   r.forward_seconds * 1e3);
    };
  Engine engine(model, o);
  std::mt19937 rng(42);
  std::mutex mu;
  std::condition_variable cv;
  int pending = streams, started = 0;
  size_t after_start = 0;
  Clock::time_point all_started;
  std::vector<std::vector<int32_t>> ids(static_cast<size_t>(streams));
  auto t = Clock::now();
  for (int s = 0; s < streams; ++s) {
    GenerationRequest r;
    r.prompt = random_ids(rng, prompt, model.config().vocab_size);
    r.max_tokens = reply;
    r.sampling.temperature = 0.0f;
    r.on_token = [&, s](const SampledToken& tok) {
      std::lock_guard lock(mu);
      auto& v = ids[size_t(s)];
      if (started == streams) ++after_start;
      v.push_back(tok.id);
      if (v.size() == 1 && ++started == streams) all_started = Clock::now();
      return true;
    };
    r.on_done = [&](const GenerationResult&) {
      std::lock_guard lock(mu);
      --pending;
      cv.notify_all();
    };
    if (!engine.submit(std::move(r))) throw Error("engine queue refused a benchmark stream");
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return pending == 0; });
  const auto end = Clock::now();
  EngineRun out;
  Sha256 sha;
  size_t tokens = 0;
  for (const auto& v : ids) {
    sha.update(v.data(), v.size() * sizeof(int32_t));
    tokens += v.size();
  }
  out.whole_rate = double(tokens) / std::chrono::duration<double>(end - t).count();
  const double decode_time = std::chrono::duration<double>(end - all_started).count();
  out.decode_rate = started == streams && decode_time > 0 ? double(after_start) / decode_time : 0.0;
  out.sha = Sha256::hex(sha.finish());
  return out;
}

// "1,16,64" → {1, 16, 64}; "none" → no GEMM table.
std::vector<int> parse_rows(const std::string& list) {
  std::vector<int> rows;
  if (list == "none") return rows;
  for (const std::string& item : split_commas(list)) rows.push_back(std::stoi(item));
  return rows;
}

int bench(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string dir, like, synthetic;
  int decode = 128, prefill = 2048, max_streams = 64, layers = 0, tp = 1;
  EngineLoad load;
  bool gemm_only = false, rounds_only = false;
  std::string host_profile;  // where the host profile of the largest engine run goes (empty: none)
  std::string round_log;     // where the rounds of the largest engine run go (empty: none)
  std::vector<int> gemm_rows = {1, 16, 32, 64, 2048};
  std::vector<std::string> gemm_shapes;
  for (size_t i = 0; i < args.size(); ++i) {
    auto next = [&] { return i + 1 < args.size() ? args[++i] : throw Error("missing value after " + args[i]); };
    if (args[i] == "--decode") decode = std::stoi(next());
    else if (args[i] == "--prefill") prefill = std::stoi(next());
    else if (args[i] == "--reply") load.reply = std::stoi(next());
    else if (args[i] == "--stream-prompt") load.prompt = std::stoi(next());
    else if (args[i] == "--round-tokens") load.round_tokens = std::stoi(next());
    else if (args[i] == "--prefill-chunk") load.prefill_chunk = std::stoi(next());
    else if (args[i] == "--prefill-first") load.prefill_first = true;
    else if (args[i] == "--max-streams") max_streams = std::stoi(next());
    else if (args[i] == "--make-like") like = next();
    else if (args[i] == "--synthetic") synthetic = next();
    else if (args[i] == "--layers") layers = std::stoi(next());
    else if (args[i] == "--tensor-parallel") tp = std::stoi(next());
    else if (args[i] == "--gemm-rows") gemm_rows = parse_rows(next());
    else if (args[i] == "--gemm-shapes") gemm_shapes = gemm_shape_names(next());
    else if (args[i] == "--gemm-only") gemm_only = true;
    else if (args[i] == "--rounds-only") rounds_only = true;
    else if (args[i] == "--host-profile") host_profile = next();
    else if (args[i] == "--round-log") round_log = next();
    else dir = args[i];
  }
  if (load.round_tokens < 0 || load.prefill_chunk < 1)
    throw Error("--round-tokens must be positive (0: the default) and --prefill-chunk at least 1");
  if (dir.empty() == synthetic.empty() && !gemm_only)
    throw Error("usage: bench_gpu [--make-like NAME [--layers N]] CHECKPOINT_DIR [options] | --synthetic NAME "
                "[--layers N] [options] | --gemm-only [options]");
  std::optional<Synthetic> made;
  if (!synthetic.empty()) made = synthetic_preset(synthetic, layers);
  if (!cuda_device_available())
    throw Error("no CUDA device: bench_gpu needs an NVIDIA GPU and its driver, and this machine shows none");
  if (!like.empty()) {
    auto t = Clock::now();
    auto config = preset_config(like);
    ConfigOverrides o;
    o.layers = layers;
    apply_overrides(config, o);
    make_checkpoint(config, dir, MakeCheckpointOptions{});
    std::printf("checkpoint %s (like %s, %d layers) written in %.1f s\n", dir.c_str(), like.c_str(),
                parse_model_config(config, "preset").num_layers, seconds_since(t));
  }
  const double bw = copy_bandwidth();
  std::printf("device copy bandwidth (read + write): %.0f GB/s\n", bw / 1e9);
  if (!gemm_rows.empty()) gemm_rates(gemm_rows, gemm_shapes, bw);
  if (gemm_only) return 0;
  auto t = Clock::now();
  ModelConfig config;
  std::shared_ptr<Checkpoint> checkpoint;
  const cuda::SyntheticSpread* spread = nullptr;
  if (synthetic.empty()) {
    config = load_model_config(dir);
    checkpoint = Checkpoint::open(dir);
  } else {
    config = made->config;
    spread = &made->spread;
  }
  std::unique_ptr<Model> model = make_model(config, checkpoint, spread, tp);
  std::string source = synthetic.empty() ? "loaded from " + dir
                                         : "like " + synthetic + ", synthetic weights made on the device";
  if (tp > 1) source += ", split over " + std::to_string(tp) + " GPUs (weights per GPU)";
  std::printf("model %s in %.1f s: %d layers, hidden %d, %.2f GB of bf16 matrices\n", source.c_str(),
              seconds_since(t), config.num_layers, config.hidden_size, double(model->weight_bytes()) / 1e9);
  std::mt19937 rng(1);
  if (rounds_only) {  // decode rounds of --max-streams rows alone (for a profiler)
    decode_rounds(*model, rng, max_streams, true, 40);
    return 0;
  }
  {
    Direct d(*model, prefill + 64);
    auto ids = random_ids(rng, prefill, config.vocab_size);
    d.run(ids, 0, true);
    std::vector<double> times;
    for (int i = 0; i < 3; ++i) {
      auto s = Clock::now();
      d.run(ids, 0, true);
      times.push_back(seconds_since(s));
    }
    std::sort(times.begin(), times.end());
    std::printf("prefill %d tokens: %.1f ms, %.0f tok/s\n", prefill, times[1] * 1e3, prefill / times[1]);
  }
  const std::mt19937 before_decode = rng;
  std::mt19937 host_pick_rng = rng;
  const Batch1Decode step = batch1_decode(*model, rng, decode);
  {
    const double rate = 1.0 / step.step_seconds;
    const double floor_rate = bw / double(model->weight_bytes());
    std::printf("batch-1 decode: %.1f tok/s; floor %.1f tok/s (weight bytes / copy rate); fraction %.2f; "
                "token_sha256 %s\n",
                rate, floor_rate, rate / floor_rate, step.sha.c_str());
    const Batch1Decode host = batch1_decode(*model, host_pick_rng, decode, true);
    std::printf("batch-1 decode, each logits row brought to the host for the pick: %.1f tok/s; fraction %.2f; "
                "token_sha256 %s\n",
                1.0 / host.step_seconds, 1.0 / host.step_seconds / floor_rate, host.sha.c_str());
  }
  if (model->memory_spec().has_state())
    std::printf("verify windows: skipped (a recurrent model verifies through state snapshots)\n");
  else
    verify_windows(*model, rng);
  decode_rounds(*model, rng, max_streams);
  std::printf("engine runs: N streams x (%d-token prompt + %d greedy tokens), rounds of up to %s rows, prompt chunks "
              "of %d%s; decode = tokens after every stream's first / time to the last finish; whole = all tokens / "
              "wall time from the first submit\n",
              load.prompt, load.reply,
              load.round_tokens > 0 ? std::to_string(load.round_tokens).c_str() : "max(2048, 2 N)",
              load.prefill_chunk, load.prefill_first ? ", prefill first" : "");
  std::printf("%8s %14s %14s  %s\n", "streams", "decode tok/s", "whole tok/s", "token_sha256");
  for (int n = 1; n <= max_streams; n *= 2) {
    std::optional<HostProfile> profile;
    const bool largest = n * 2 > max_streams;
    if (!host_profile.empty() && largest) profile.emplace(997);
    std::FILE* rounds = nullptr;
    if (!round_log.empty() && largest) {
      rounds = std::fopen(round_log.c_str(), "w");
      if (!rounds) throw Error("cannot write " + round_log);
      std::fprintf(rounds, "# rows decode_rows prompt_rows chunks forward_ms\n");
    }
    EngineRun r = engine_run(*model, n, load, rounds);
    if (rounds) std::fclose(rounds);
    if (profile) profile->write(host_profile);
    std::printf("%8d %14.1f %14.1f  %s\n", n, r.decode_rate, r.whole_rate, r.sha.c_str());
    std::fflush(stdout);
  }
  if (tp > 1) {
    model.reset();  // the TP model's memory back before the all-reduce buffers and the whole model
    report_tensor_parallel_limit({config, checkpoint, spread, tp, step.step_seconds, before_decode, decode});
  }
  return 0;
}

}  // namespace
}  // namespace fs

int main(int argc, char** argv) { return fs::run_bench("bench_gpu", fs::bench, argc, argv); }
#else
int main() { return fs::no_cuda_backend("bench_gpu"); }
#endif

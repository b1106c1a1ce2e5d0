// Attention kernel benchmark on the Llama-3-8B head shape (32 heads, 8 kv heads, head_dim 128, pages of 16):
// a 2048-row prefill chunk (TFLOP/s of the causal work) and 1/16/64 decode rows at 128/576/1024/4096/16384 keys
// (TB/s of the K/V bytes read), for the tensor-core kernel with split scratch (as the model runs it: a long row's key
// chunks on several CTAs), without it ("mma-1cta": every row's chunks in one CTA) and the plain kernel; and a mixed
// pass of 56 decode rows at 576 keys ahead of four 512-row prompts, the decode rows one per CTA ("mma") or in the
// prompts' 16-row tiles ("mma-tiles"); then the rotary + K/V store that feeds them at 64 and 2048 rows, with and
// without the per-head q/k norm (TB/s of the bytes it must move).
// Usage: bench_attention [--reps N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_main.h"
#include "core/error.h"

#ifdef FOLDSERVE_WITH_CUDA
#include "backends/cuda/host/check.h"
#include "backends/cuda/host/device.h"
#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/stream.h"
#include "backends/cuda/kernels/fill_ops.h"
#include "backends/cuda/kernels/ops.h"

namespace fs {
namespace {

namespace k = cuda::kernels;
using Clock = std::chrono::steady_clock;

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128, kPageTokens = 16;

struct Bench {
  cuda::Device device{0};
  cuda::Stream stream;
  cuda::DeviceArena arena{size_t{8} << 30, "attention benchmark"};
  uint16_t* keys = nullptr;
  uint16_t* values = nullptr;
  float* q = nullptr;
  uint16_t* out = nullptr;
  size_t pages = 0;
  k::AttentionSplit split;

  // A pool of `pages` pages, q and out for `rows` rows; keys, values and q uniform in [-1, 1), so the scores differ
  // and a row's running maximum moves as on real data (constant inputs would settle it after one block).
  Bench(size_t pool_pages, int rows) : pages(pool_pages) {
    const size_t kv_bytes = pages * kPageTokens * kKvHeads * kHeadDim * 2;
    keys = reinterpret_cast<uint16_t*>(arena.allocate(kv_bytes, "keys").ptr);
    values = reinterpret_cast<uint16_t*>(arena.allocate(kv_bytes, "values").ptr);
    const size_t q_elems = size_t(rows) * kHeads * kHeadDim;
    q = reinterpret_cast<float*>(arena.allocate(q_elems * 4, "q").ptr);
    out = reinterpret_cast<uint16_t*>(arena.allocate(q_elems * 2, "out").ptr);
    split.record_capacity = int(pages * kPageTokens / k::kSplitKeys) + 64;
    split.records = reinterpret_cast<float*>(
        arena.allocate(size_t(split.record_capacity) * k::attention_record_floats({kHeads, kKvHeads, kHeadDim}) * 4,
                       "chunk records").ptr);
    const auto counters = arena.allocate(64 * kHeads * 4, "arrival counters");
    split.counters = reinterpret_cast<int32_t*>(counters.ptr);
    FS_CU(memset_d8_async, counters.ptr, 0, 64 * kHeads * 4, stream.handle());
    k::fill_uniform_bf16(keys, kv_bytes / 2, 1, 1.0f, 0.0f, stream.handle());
    k::fill_uniform_bf16(values, kv_bytes / 2, 2, 1.0f, 0.0f, stream.handle());
    k::fill_uniform_f32(q, q_elems, 3, 1.0f, 0.0f, stream.handle());
    stream.synchronize();
  }

  template <typename T>
  const T* upload(const std::vector<T>& host) {
    auto span = arena.allocate(std::max<size_t>(host.size() * sizeof(T), 16), "metadata");
    FS_CU(memcpy_htod_async, span.ptr, host.data(), host.size() * sizeof(T), stream.handle());
    stream.synchronize();
    return reinterpret_cast<const T*>(static_cast<uintptr_t>(span.ptr));
  }

  // Mean seconds per call over `reps` calls after two warm-ups.
  double time(const std::vector<int32_t>& row_keys, const std::vector<int32_t>& row_table,
              const std::vector<int32_t>& page_list, const char* kernel, int reps, int lone = 0) {
    const bool plain = std::strcmp(kernel, "plain") == 0;
    const int rows = int(row_keys.size());
    k::PagedKv kv{keys, values, upload(row_keys), upload(row_keys), upload(row_table), upload(page_list),
                  kPageTokens};
    const k::HeadShape shape{kHeads, kKvHeads, kHeadDim};
    const float scale = 1.0f / std::sqrt(float(kHeadDim));
    auto call = [&] {
      if (plain)
        k::plain_attention(q, rows, shape, kv, scale, nullptr, out, stream.handle());
      else
        k::attention(q, rows, shape, kv, scale, nullptr,
                     std::strcmp(kernel, "mma-1cta") != 0 ? split : k::AttentionSplit{}, out, stream.handle(),
                     lone);
    };
    return mean_seconds(call, reps);
  }

  // Mean seconds per qkv_rope_store of `rows` rows (to slots 0 … rows − 1; norm weights of 1 or none).
  double time_rope_store(int rows, bool norm, int reps) {
    const k::HeadShape shape{kHeads, kKvHeads, kHeadDim};
    const size_t width = size_t(kHeads + 2 * kKvHeads) * kHeadDim;
    std::vector<int32_t> slots(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) slots[size_t(r)] = r;
    k::PagedKv kv{keys, values, upload(slots), nullptr, nullptr, nullptr, kPageTokens};
    const auto floats = [&](size_t n, float v) { return upload(std::vector<float>(n, v)); };
    const float* qkv = floats(size_t(rows) * width, 0.5f);
    const float* cos = floats(size_t(rows) * kHeadDim / 2, 0.8f);
    const float* sin = floats(size_t(rows) * kHeadDim / 2, 0.6f);
    const float* weights = norm ? floats(kHeadDim, 1.0f) : nullptr;
    return mean_seconds(
        [&] { k::qkv_rope_store(qkv, rows, shape, weights, weights, 1e-6f, cos, sin, kv, q, stream.handle()); },
        reps);
  }

  // Mean seconds per call of `call` over `reps` calls after two warm-ups.
  template <typename F>
  double mean_seconds(const F& call, int reps) {
    for (int i = 0; i < 2; ++i) call();
    stream.synchronize();
    const auto t = Clock::now();
    for (int i = 0; i < reps; ++i) call();
    stream.synchronize();
    return std::chrono::duration<double>(Clock::now() - t).count() / reps;
  }
};

int bench(int argc, char** argv) {
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else
      throw Error(std::string("unknown argument ") + argv[i] + " (usage: bench_attention [--reps N])");
  }
  std::printf("attention, %d heads / %d kv heads, head_dim %d, pages of %d tokens, mean of %d calls\n", kHeads,
              kKvHeads, kHeadDim, kPageTokens, reps);
  std::printf("%-8s %6s %6s %8s %12s %10s %10s\n", "kernel", "rows", "keys", "case", "us", "TFLOP/s", "TB/s");
  const size_t row_kv_bytes = size_t(kKvHeads) * kHeadDim * 2 * 2;  // K and V of one position
  {
    const int rows = 2048;
    Bench b(rows / kPageTokens, rows);
    std::vector<int32_t> keys(rows), table(rows, 0), pages(rows / kPageTokens);
    double flop = 0;
    for (int r = 0; r < rows; ++r) {
      keys[size_t(r)] = r + 1;
      flop += 4.0 * kHeads * kHeadDim * (r + 1);
    }
    for (size_t p = 0; p < pages.size(); ++p) pages[p] = int32_t((p * 37) % pages.size());
    for (const char* kernel : {"mma", "plain"}) {
      const double s = b.time(keys, table, pages, kernel, std::strcmp(kernel, "plain") == 0 ? 2 : reps);
      std::printf("%-8s %6d %6d %8s %12.1f %10.2f %10.3f\n", kernel, rows, rows, "prefill", s * 1e6, flop / s / 1e12,
                  double(rows) * row_kv_bytes / s / 1e12);
    }
  }
  {
    const int decode = 56, context = 576, prompts = 4, prompt = 512;
    const int decode_pages = context / kPageTokens, prompt_pages = prompt / kPageTokens;
    const int rows = decode + prompts * prompt;
    Bench b(size_t(decode) * decode_pages + size_t(prompts) * prompt_pages, rows);
    std::vector<int32_t> keys, table, pages(b.pages);
    std::vector<double> flop(1, 0.0);  // flop[i]: the work of the first i rows
    for (int s = 0; s < decode; ++s) {
      keys.push_back(context);
      table.push_back(s * decode_pages);
      flop.push_back(flop.back() + 4.0 * kHeads * kHeadDim * context);
    }
    for (int s = 0; s < prompts; ++s)
      for (int r = 0; r < prompt; ++r) {
        keys.push_back(r + 1);
        table.push_back(decode * decode_pages + s * prompt_pages);
        flop.push_back(flop.back() + 4.0 * kHeads * kHeadDim * (r + 1));
      }
    for (size_t p = 0; p < pages.size(); ++p) pages[p] = int32_t((p * 37) % pages.size());
    auto part = [](const std::vector<int32_t>& v, int begin, int end) {
      return std::vector<int32_t>(v.begin() + begin, v.begin() + end);
    };
    // Both parts together, then each alone.
    const struct {
      const char* kernel;
      int begin, end, lone;
      const char* what;
    } cases[] = {{"mma", 0, rows, decode, "mixed"}, {"mma-tiles", 0, rows, 0, "mixed"},
                 {"mma", 0, decode, 0, "decode"}, {"mma", decode, rows, 0, "prompts"}};
    for (const auto& c : cases) {
      const double s = b.time(part(keys, c.begin, c.end), part(table, c.begin, c.end), pages, c.kernel, reps, c.lone);
      std::printf("%-8s %6d %6d %8s %12.1f %10.2f\n", c.kernel, c.end - c.begin, context, c.what, s * 1e6,
                  (flop[size_t(c.end)] - flop[size_t(c.begin)]) / s / 1e12);
    }
  }
  for (int rows : {64, 2048}) {
    Bench b(size_t(rows) / kPageTokens, rows);
    // Read: the qkv rows and cos/sin; written: q in f32, K and V in bf16.
    const double bytes = double(rows) * ((kHeads + 2 * kKvHeads) * kHeadDim * 4 + kHeadDim * 4 +
                                         kHeads * kHeadDim * 4 + 2 * kKvHeads * kHeadDim * 2);
    for (bool norm : {false, true}) {
      const double s = b.time_rope_store(rows, norm, reps);
      std::printf("%-8s %6d %6s %8s %12.1f %10s %10.3f\n", norm ? "rope-qkn" : "rope", rows, "-", "store", s * 1e6,
                  "-", bytes / s / 1e12);
    }
  }
  for (int streams : {1, 16, 64})
    for (int n : {128, 576, 1024, 4096, 16384}) {
      const int per = n / kPageTokens;
      Bench b(size_t(streams) * per, streams);
      std::vector<int32_t> keys(size_t(streams), n), table(static_cast<size_t>(streams)), pages(size_t(streams) * per);
      for (int s = 0; s < streams; ++s) table[size_t(s)] = s * per;
      for (size_t p = 0; p < pages.size(); ++p) pages[p] = int32_t((p * 97) % pages.size());
      const double flop = 4.0 * kHeads * kHeadDim * n * streams, bytes = double(row_kv_bytes) * n * streams;
      for (const char* kernel : {"mma", "mma-1cta", "plain"}) {
        const double s = b.time(keys, table, pages, kernel, reps);
        std::printf("%-8s %6d %6d %8s %12.1f %10.2f %10.3f\n", kernel, streams, n, "decode", s * 1e6,
                    flop / s / 1e12, bytes / s / 1e12);
      }
    }
  return 0;
}

}  // namespace
}  // namespace fs

int main(int argc, char** argv) { return fs::run_bench("bench_attention", fs::bench, argc, argv); }
#else
int main() { return fs::no_cuda_backend("bench_attention"); }
#endif

// Gated DeltaNet kernel benchmark on the Qwen3.5 shapes (27B: 16 key / 48 value heads; 2B: 16 / 16; heads of 128,
// kernel 4): the conv with its q/k normalisation (deltanet_conv_normalized), the recurrence and the gated norm, for a 2048-row prefill
// of one sequence, 4 sequences of 512 rows, and decode calls of one row for 1/16/64 sequences. Prints microseconds
// a call (one layer), the recurrence's rows per microsecond and the first digits of its output's sha256 (the same
// calls in the same order give the same bits).
// Usage: bench_deltanet [--reps N] [--shape 27b|2b|both]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_main.h"
#include "core/error.h"
#include "core/sha256.h"

#ifdef FOLDSERVE_WITH_CUDA
#include "backends/cuda/host/check.h"
#include "backends/cuda/host/device.h"
#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/stream.h"
#include "backends/cuda/kernels/deltanet_ops.h"
#include "backends/cuda/kernels/fill_ops.h"

namespace fs {
namespace {

namespace k = cuda::kernels;
using Clock = std::chrono::steady_clock;

struct Shape {
  const char* name;
  DeltaNetShape layer;
};

// One layer's inputs and outputs for calls of up to `max_rows` rows and `max_seqs` sequences.
struct Bench {
  DeltaNetShape sh;
  cuda::Stream stream;
  cuda::DeviceArena arena;
  int W = 0;  // fused projection width: qkv | z | b | a
  float *fused = nullptr, *conv = nullptr, *core = nullptr, *core2 = nullptr, *prep = nullptr, *weight = nullptr;
  float *a_log = nullptr, *dt_bias = nullptr;
  float *norm = nullptr, *states = nullptr;
  uint16_t* normed = nullptr;
  k::DeltaNetSeq* seqs = nullptr;

  Bench(const DeltaNetShape& shape, int max_rows, int max_seqs)
      : sh(shape),
        arena(size_t(max_rows) * (shape.conv_channels() * 2 + shape.value_channels() * 3 + 2 * shape.value_heads) * 4 +
                  size_t(max_seqs) * shape.state_floats() * 4 + (size_t{96} << 20),
              "deltanet benchmark") {
    W = sh.conv_channels() + sh.value_channels() + 2 * sh.value_heads;
    auto floats = [&](size_t n, const char* what) { return reinterpret_cast<float*>(arena.allocate(n * 4, what).ptr); };
    fused = floats(size_t(max_rows) * W, "fused projections");
    conv = floats(size_t(max_rows) * sh.conv_channels(), "conv out");
    core = floats(size_t(max_rows) * sh.value_channels(), "recurrence out");
    core2 = floats(size_t(max_rows) * sh.value_channels(), "chunked recurrence out");
    prep = floats(k::deltanet_chunked_prep_floats(max_rows, max_seqs, sh), "chunked recurrence scratch");
    normed = reinterpret_cast<uint16_t*>(arena.allocate(size_t(max_rows) * sh.value_channels() * 2, "normed").ptr);
    weight = floats(size_t(sh.conv_channels()) * sh.conv_kernel, "conv weight");
    a_log = floats(size_t(sh.value_heads), "a_log");
    dt_bias = floats(size_t(sh.value_heads), "dt_bias");
    norm = floats(size_t(sh.value_dim), "norm");
    states = floats(size_t(max_seqs) * sh.state_floats(), "states");
    seqs = reinterpret_cast<k::DeltaNetSeq*>(arena.allocate(size_t(max_seqs) * sizeof(k::DeltaNetSeq), "seqs").ptr);
    void* s = stream.handle();
    k::fill_uniform_f32(fused, size_t(max_rows) * W, 1, 1.0f, 0.0f, s);
    k::fill_uniform_f32(weight, size_t(sh.conv_channels()) * sh.conv_kernel, 2, 0.5f, 0.0f, s);
    k::fill_uniform_f32(a_log, size_t(sh.value_heads), 3, 0.5f, 0.0f, s);
    k::fill_uniform_f32(dt_bias, size_t(sh.value_heads), 4, 1.0f, 0.0f, s);
    k::fill_uniform_f32(norm, size_t(sh.value_dim), 5, 0.5f, 1.0f, s);
    k::fill_uniform_f32(states, size_t(max_seqs) * sh.state_floats(), 6, 0.1f, 0.0f, s);
    stream.synchronize();
  }

  // `count` sequences of `rows` rows each, fresh or continuing from their slots.
  k::DeltaNetBatch batch(int count, int rows, bool fresh, bool chunked = false) {
    std::vector<k::DeltaNetSeq> host(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i)
      host[size_t(i)] = {i * rows, rows, int64_t(i) * int64_t(sh.state_floats()), fresh ? 1 : 0, 0, 0, chunked ? 1 : 0};
    FS_CU(memcpy_htod_async, cuda::CUdeviceptr(reinterpret_cast<uintptr_t>(seqs)), host.data(),
          host.size() * sizeof(k::DeltaNetSeq), stream.handle());
    stream.synchronize();
    return {seqs, count, nullptr, states, nullptr};
  }

  // The first 16 hex digits of the sha256 of `n` floats at `p` (the recurrence's output bits).
  std::string digest(const float* p, size_t n) {
    std::vector<float> host(n);
    FS_CU(memcpy_dtoh_async, host.data(), cuda::CUdeviceptr(reinterpret_cast<uintptr_t>(p)), n * 4, stream.handle());
    stream.synchronize();
    Sha256 sha;
    sha.update(host.data(), n * 4);
    return Sha256::hex(sha.finish()).substr(0, 16);
  }

  // rel L2 and max |x − y| of `n` floats, y the reference.
  std::pair<double, double> compare(const float* x, const float* y, size_t n) {
    std::vector<float> hx(n), hy(n);
    FS_CU(memcpy_dtoh_async, hx.data(), cuda::CUdeviceptr(reinterpret_cast<uintptr_t>(x)), n * 4, stream.handle());
    FS_CU(memcpy_dtoh_async, hy.data(), cuda::CUdeviceptr(reinterpret_cast<uintptr_t>(y)), n * 4, stream.handle());
    stream.synchronize();
    double num = 0, den = 0, mx = 0;
    for (size_t i = 0; i < n; ++i) {
      const double e = double(hx[i]) - double(hy[i]);
      num += e * e, den += double(hy[i]) * hy[i], mx = std::max(mx, std::abs(e));
    }
    return {std::sqrt(num / std::max(den, 1e-300)), mx};
  }

  // Mean seconds per call of `step` over `reps` calls after two warm-ups.
  template <typename Step>
  double time(int reps, Step step) {
    for (int i = 0; i < 2; ++i) step();
    stream.synchronize();
    const auto t = Clock::now();
    for (int i = 0; i < reps; ++i) step();
    stream.synchronize();
    return std::chrono::duration<double>(Clock::now() - t).count() / reps;
  }
};

void run_shape(const Shape& shape, int reps) {
  const DeltaNetShape& sh = shape.layer;
  std::printf("\n%s: %d key / %d value heads, key_dim %d, value_dim %d, conv kernel %d; mean of %d calls\n",
              shape.name, sh.key_heads, sh.value_heads, sh.key_dim, sh.value_dim, sh.conv_kernel, reps);
  std::printf("%-6s %6s %10s %10s %14s %10s %12s %18s\n", "seqs", "rows", "case", "conv+qk us", "recurrence us",
              "norm us", "rec rows/us", "recurrence sha256");
  struct Case {
    int seqs, rows;
    const char* what;
  };
  Bench b(sh, 2048, 64);
  for (const Case c : {Case{1, 2048, "prefill"}, Case{4, 512, "prefill"}, Case{1, 1, "decode"},
                       Case{16, 1, "decode"}, Case{64, 1, "decode"}}) {
    const int T = c.seqs * c.rows;
    const bool fresh = c.rows > 1;
    const k::DeltaNetBatch batch = b.batch(c.seqs, c.rows, fresh);
    void* st = b.stream.handle();
    const float* ba = b.fused + sh.conv_channels() + sh.value_channels();
    const double conv_s =
        b.time(reps, [&] { k::deltanet_conv_normalized(b.fused, b.W, T, b.weight, sh, batch, b.conv, st); });
    const double rec_s = b.time(reps, [&] {
      k::deltanet_recurrence(b.conv, T, ba, ba + sh.value_heads, b.W, b.a_log, b.dt_bias, sh, batch, b.core, st);
    });
    const std::string bits = b.digest(b.core, size_t(T) * sh.value_channels());
    const double norm_s = b.time(reps, [&] {
      k::deltanet_gated_norm(b.core, b.fused + sh.conv_channels(), b.W, b.norm, T, sh, b.normed, st);
    });
    std::printf("%-6d %6d %10s %10.1f %14.1f %10.1f %12.2f %18s\n", c.seqs, c.rows, c.what, conv_s * 1e6,
                rec_s * 1e6, norm_s * 1e6, T / (rec_s * 1e6), bits.c_str());
    const k::DeltaNetBatch chunked_batch = b.batch(c.seqs, c.rows, fresh, true);
    if (c.rows % 16 == 0)
      for (bool one_pass : {false, true}) {
        auto chunked = [&](int parts) {
          return b.time(reps, [&] {
            k::deltanet_recurrence_chunked(b.conv, T, ba, ba + sh.value_heads, b.W, b.a_log, b.dt_bias, sh,
                                           chunked_batch, c.seqs, b.prep, b.core2, one_pass, parts, st);
          });
        };
        const double prep_s = chunked(1), state_s = chunked(2), chunk_s = chunked(3);
        const auto [rel, mx] = b.compare(b.core2, b.core, size_t(T) * sh.value_channels());
        std::printf("  chunked on tensor cores (%s): %.1f us (prep %.1f, state %.1f), rel L2 %.3g, max abs %.3g "
                    "against the token loop\n",
                    one_pass ? "one TF32 pass" : "three TF32 passes", chunk_s * 1e6, prep_s * 1e6, state_s * 1e6,
                    rel, mx);
      }
  }
}

int bench(int argc, char** argv) {
  int reps = 20;
  std::string which = "both";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--shape") == 0 && i + 1 < argc)
      which = argv[++i];
    else
      throw Error(std::string("unknown argument ") + argv[i] +
                  " (usage: bench_deltanet [--reps N] [--shape 27b|2b|both])");
  }
  if (which != "27b" && which != "2b" && which != "both") throw Error("--shape takes 27b, 2b or both");
  cuda::Device device(0);
  const Shape shapes[] = {{"Qwen3.5-27B DeltaNet", {16, 48, 128, 128, 4, 1e-6f}},
                          {"Qwen3.5-2B DeltaNet", {16, 16, 128, 128, 4, 1e-6f}}};
  for (const Shape& s : shapes)
    if (which == "both" || (which == "27b") == (s.layer.value_heads == 48)) run_shape(s, reps);
  return 0;
}

}  // namespace
}  // namespace fs

int main(int argc, char** argv) { return fs::run_bench("bench_deltanet", fs::bench, argc, argv); }
#else
int main() { return fs::no_cuda_backend("bench_deltanet"); }
#endif

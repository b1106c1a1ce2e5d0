// All-reduce cost of one tensor-parallel decode step on every visible GPU (one thread and stream per GPU): the
// Llama-3-8B shape's messages (2 per layer × 32 layers of rows × 4096 f32) through the fixed-order all-reduce
// (all-gather, then the rank-ordered sum) eager and replayed from a CUDA graph, beside plain ncclAllReduce.
// NCCL's NVLink multicast (NVLS) is switched off. Needs 2 or more GPUs; with fewer it says so and exits 0.
// Usage: bench_allreduce [--steps N]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "allreduce_timing.h"
#include "backends/cuda/host/device.h"
#include "backends/cuda/host/nccl_table.h"
#include "bench_main.h"
#include "core/error.h"

namespace fs {

namespace {

constexpr int kHidden = 4096, kLayers = 32, kMessagesPerStep = 2 * kLayers;
const int kBatches[] = {1, 16, 64};

void report(int batch, const char* what, double seconds) {
  std::printf("%-6d %-28s %12.1f %12.2f\n", batch, what, seconds * 1e6, seconds * 1e6 / kMessagesPerStep);
  std::fflush(stdout);
}

// One fixed-order all-reduce of batch-16 partials must leave the host's rank-ordered sum on every rank, bit for bit.
void check_bits(AllReduceTiming& timing, int gpus) {
  const bool same = timing.matches_host_sum(size_t(16) * kHidden);
  std::printf("fixed-order all-reduce of %d ranks: %s\n", gpus,
              same ? "every rank holds the host's rank-ordered sum bit for bit" : "MISMATCH");
  if (!same) throw Error("the fixed-order all-reduce differs from the rank-ordered host sum");
}

void measure(int gpus, int steps) {
  AllReduceTiming timing(gpus, size_t(kBatches[2]) * kHidden, kMessagesPerStep, steps);
  check_bits(timing, gpus);
  std::printf("%-6s %-28s %12s %12s\n", "batch", "all-reduce", "us/step", "us/message");
  for (int batch : kBatches) {
    const size_t n = size_t(batch) * kHidden;
    using Kind = AllReduceKind;
    using Replay = AllReduceReplay;
    report(batch, "fixed-order, eager", timing.seconds_per_step(Kind::fixed_order, Replay::eager, n));
    report(batch, "fixed-order, CUDA graph", timing.seconds_per_step(Kind::fixed_order, Replay::graph, n));
    report(batch, "ncclAllReduce, eager", timing.seconds_per_step(Kind::nccl, Replay::eager, n));
    report(batch, "ncclAllReduce, CUDA graph", timing.seconds_per_step(Kind::nccl, Replay::graph, n));
  }
}

int bench(int argc, char** argv) {
  int steps = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--steps" && i + 1 < argc) steps = std::stoi(argv[++i]);
    else throw Error("unknown argument " + arg + " (usage: bench_allreduce [--steps N])");
  }
  setenv("NCCL_NVLS_ENABLE", "0", 1);  // NVLink multicast off, before NCCL starts
  int gpus = 0;
  std::string why;
  try {
    gpus = cuda::device_count();
  } catch (const Error& e) {
    why = std::string(" (") + e.what() + ")";
  }
  if (gpus < 2) {
    std::printf("bench_allreduce needs 2 GPUs; this machine has %d%s, nothing measured\n", gpus, why.c_str());
    return 0;
  }
  int version = 0;
  cuda::check_nccl(cuda::nccl().get_version(&version), cuda::nccl_symbol::get_version);
  std::printf("NCCL %s, %d GPUs (one thread and stream each), NCCL_NVLS_ENABLE=0; one decode step = %d messages "
              "of batch x %d f32 (Llama-3-8B: 2 per layer x %d layers), %d steps per figure\n",
              cuda::nccl_version_text(version).c_str(), gpus, kMessagesPerStep, kHidden, kLayers, steps);
  measure(gpus, steps);
  return 0;
}

}  // namespace

}  // namespace fs

int main(int argc, char** argv) { return fs::run_bench("bench_allreduce", fs::bench, argc, argv); }

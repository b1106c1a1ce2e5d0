// All-reduce cost of one tensor-parallel decode step on every visible GPU (one thread and stream per GPU): the
// Llama-3-8B shape's messages (2 per layer × 32 layers of rows × 4096 f32) through the fixed-order all-reduce
// (all-gather, then the rank-ordered sum) eager and replayed from a CUDA graph, beside plain ncclAllReduce.
// NCCL's NVLink multicast (NVLS) is switched off. Needs 2 or more GPUs; with fewer it says so and exits 0.
// Usage: bench_allreduce [--steps N]
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/host/check.h"
#include "backends/cuda/host/device.h"
#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/graph.h"
#include "backends/cuda/host/nccl_table.h"
#include "backends/cuda/host/rank_sum_order.h"
#include "backends/cuda/host/stream.h"
#include "backends/cuda/host/tensor_parallel_group.h"
#include "backends/cuda/kernels/rank_sum_ops.h"
#include "bench_main.h"
#include "core/error.h"

namespace fs {

namespace {

constexpr int kHidden = 4096, kLayers = 32, kMessagesPerStep = 2 * kLayers;
const int kBatches[] = {1, 16, 64};

using Clock = std::chrono::steady_clock;

// One way of all-reducing a rank's message in place: (rank, message index, stream).
using Reduce = std::function<void(int, int, cuda::CUstream)>;

// Per rank: its device, stream and, per message, the buffer and the all-gather scratch.
struct Rank {
  std::unique_ptr<cuda::Device> device;
  std::unique_ptr<cuda::Stream> stream;
  std::unique_ptr<cuda::DeviceArena> arena;
  std::vector<float*> buffers, gathered;
};

float* as_floats(const cuda::DeviceSpan& span) { return reinterpret_cast<float*>(static_cast<uintptr_t>(span.ptr)); }

std::vector<float> partial(int rank, size_t n) {
  std::mt19937 rng(1000 + rank);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

class Bench {
 public:
  Bench(int gpus, int steps) : ranks_(gpus), steps_(steps), sync_(gpus) {
    std::vector<int> devices;
    for (int r = 0; r < gpus; ++r) devices.push_back(r);
    group_ = std::make_unique<cuda::TensorParallelGroup>(
        devices, [](const float* gathered, int ranks, size_t n, float* out, cuda::CUstream stream) {
          cuda::kernels::rank_sum(gathered, ranks, n, out, stream);
        });
    state_.resize(size_t(gpus));
  }

  // Runs body(rank) on one thread per rank; a failure on any rank ends the program with status 1.
  void on_every_rank(const std::function<void(int)>& body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks_; ++r)
      threads.emplace_back([&, r] {
        try {
          body(r);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "rank %d: %s\n", r, e.what());
          std::exit(1);  // the peers would wait forever in their collectives
        }
      });
    for (auto& t : threads) t.join();
  }

  void run() {
    on_every_rank([&](int r) { setup(r); });
    check_bits();
    std::printf("%-6s %-28s %12s %12s\n", "batch", "all-reduce", "us/step", "us/message");
    for (int batch : kBatches) {
      const size_t n = size_t(batch) * kHidden;
      const Reduce fixed = [&, n](int r, int m, cuda::CUstream s) {
        group_->all_reduce(r, state_[size_t(r)].buffers[size_t(m)], state_[size_t(r)].gathered[size_t(m)], n, s);
      };
      const Reduce plain = [&, n](int r, int m, cuda::CUstream s) {
        float* b = state_[size_t(r)].buffers[size_t(m)];
        cuda::check_nccl(cuda::nccl().all_reduce(b, b, n, cuda::ncclFloat32, cuda::ncclSum, group_->comm(r), s),
                         cuda::nccl_symbol::all_reduce, "rank " + std::to_string(r));
      };
      report(batch, "fixed-order, eager", time_eager(fixed));
      report(batch, "fixed-order, CUDA graph", time_graph(fixed));
      report(batch, "ncclAllReduce, eager", time_eager(plain));
      report(batch, "ncclAllReduce, CUDA graph", time_graph(plain));
    }
    on_every_rank([&](int r) {
      Rank& s = state_[size_t(r)];
      s.device->make_current();
      s.stream->synchronize();
      group_->check(r);
      s.arena.reset();
      s.stream.reset();
    });
  }

 private:
  void setup(int r) {
    Rank& s = state_[size_t(r)];
    s.device = std::make_unique<cuda::Device>(r);
    s.stream = std::make_unique<cuda::Stream>();
    const size_t most = size_t(kBatches[2]) * kHidden * sizeof(float);
    s.arena = std::make_unique<cuda::DeviceArena>(size_t(kMessagesPerStep) * (1 + ranks_) * (most + 256) + 4096,
                                                  "all-reduce buffers");
    for (int m = 0; m < kMessagesPerStep; ++m) {
      s.buffers.push_back(as_floats(s.arena->allocate(most, "message")));
      s.gathered.push_back(as_floats(s.arena->allocate(most * size_t(ranks_), "gathered partials")));
    }
    const auto host = partial(r, size_t(kBatches[2]) * kHidden);
    for (float* b : s.buffers)
      FS_CU(memcpy_htod_async, cuda::CUdeviceptr(reinterpret_cast<uintptr_t>(b)), host.data(), most,
            s.stream->handle());
    s.stream->synchronize();
  }

  // One fixed-order all-reduce of batch-16 partials: every rank must hold the host's rank-ordered sum, bit for bit.
  void check_bits() {
    const size_t n = size_t(16) * kHidden;
    std::vector<std::vector<float>> results(static_cast<size_t>(ranks_));
    on_every_rank([&](int r) {
      Rank& s = state_[size_t(r)];
      s.device->make_current();
      group_->all_reduce(r, s.buffers[0], s.gathered[0], n, s.stream->handle());
      results[size_t(r)].resize(n);
      FS_CU(memcpy_dtoh_async, results[size_t(r)].data(), cuda::CUdeviceptr(reinterpret_cast<uintptr_t>(s.buffers[0])),
            n * sizeof(float), s.stream->handle());
      s.stream->synchronize();
      group_->check(r);
    });
    std::vector<float> gathered, expected(n);
    for (int r = 0; r < ranks_; ++r) {
      const auto p = partial(r, n);
      gathered.insert(gathered.end(), p.begin(), p.end());
    }
    cuda::rank_sum_host(gathered.data(), ranks_, n, expected.data());
    bool same = true;
    for (const auto& got : results) same = same && std::memcmp(got.data(), expected.data(), n * sizeof(float)) == 0;
    std::printf("fixed-order all-reduce of %d ranks: %s\n", ranks_,
                same ? "every rank holds the host's rank-ordered sum bit for bit" : "MISMATCH");
    if (!same) throw Error("the fixed-order all-reduce differs from the rank-ordered host sum");
  }

  // Seconds per step, measured on every rank between two barriers; rank 0's figure is returned.
  double timed(int r, const std::function<void()>& step) {
    for (int i = 0; i < 5; ++i) step();
    state_[size_t(r)].stream->synchronize();
    sync_.arrive_and_wait();
    const auto start = Clock::now();
    for (int i = 0; i < steps_; ++i) step();
    state_[size_t(r)].stream->synchronize();
    sync_.arrive_and_wait();
    return std::chrono::duration<double>(Clock::now() - start).count() / steps_;
  }

  double time_eager(const Reduce& reduce) {
    double seconds = 0;
    on_every_rank([&](int r) {
      state_[size_t(r)].device->make_current();
      const cuda::CUstream stream = state_[size_t(r)].stream->handle();
      const double s = timed(r, [&] {
        for (int m = 0; m < kMessagesPerStep; ++m) reduce(r, m, stream);
      });
      if (r == 0) seconds = s;
    });
    return seconds;
  }

  double time_graph(const Reduce& reduce) {
    double seconds = 0;
    on_every_rank([&](int r) {
      state_[size_t(r)].device->make_current();
      const cuda::CUstream stream = state_[size_t(r)].stream->handle();
      for (int m = 0; m < kMessagesPerStep; ++m) reduce(r, m, stream);  // connections are made outside the capture
      state_[size_t(r)].stream->synchronize();
      sync_.arrive_and_wait();
      cuda::CapturedGraph graph(stream, [&] {
        for (int m = 0; m < kMessagesPerStep; ++m) reduce(r, m, stream);
      });
      sync_.arrive_and_wait();
      const double s = timed(r, [&] { graph.launch(stream); });
      if (r == 0) seconds = s;
    });
    return seconds;
  }

  static void report(int batch, const char* what, double seconds) {
    std::printf("%-6d %-28s %12.1f %12.2f\n", batch, what, seconds * 1e6, seconds * 1e6 / kMessagesPerStep);
    std::fflush(stdout);
  }

  int ranks_, steps_;
  std::barrier<> sync_;
  std::vector<Rank> state_;
  std::unique_ptr<cuda::TensorParallelGroup> group_;  // destroyed before the ranks' devices
};

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
  Bench(gpus, steps).run();
  return 0;
}

}  // namespace

}  // namespace fs

int main(int argc, char** argv) { return fs::run_bench("bench_allreduce", fs::bench, argc, argv); }

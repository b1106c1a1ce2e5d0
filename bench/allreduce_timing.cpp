// Per-rank buffers, threads and clocks behind AllReduceTiming.
#include "allreduce_timing.h"

#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
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
#include "core/error.h"

namespace fs {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWarmUpSteps = 5;

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

cuda::CUdeviceptr as_device(const float* p) { return cuda::CUdeviceptr(reinterpret_cast<uintptr_t>(p)); }

// Rank `rank`'s partial: n normal values from a seed of its own.
std::vector<float> partial(int rank, size_t n) {
  std::mt19937 rng(1000 + rank);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

}  // namespace

class AllReduceTiming::Ranks {
 public:
  Ranks(int gpus, size_t most_floats, int messages, int steps)
      : count_(gpus), most_floats_(most_floats), messages_(messages), steps_(steps), sync_(gpus) {
    std::vector<int> devices;
    for (int r = 0; r < gpus; ++r) devices.push_back(r);
    group_ = std::make_unique<cuda::TensorParallelGroup>(
        devices, [](const float* gathered, int ranks, size_t n, float* out, cuda::CUstream stream) {
          cuda::kernels::rank_sum(gathered, ranks, n, out, stream);
        });
    state_.resize(size_t(gpus));
    on_every_rank([&](int r) { setup(r); });
  }

  // Each rank's buffers and stream go with its device current; then the communicators, then the devices.
  ~Ranks() {
    on_every_rank([&](int r) {
      Rank& s = state_[size_t(r)];
      s.device->make_current();
      try {
        s.stream->synchronize();
      } catch (const std::exception&) {
      }
      s.arena.reset();
      s.stream.reset();
    });
  }

  double seconds_per_step(AllReduceKind kind, AllReduceReplay replay, size_t floats) {
    if (floats > most_floats_)
      throw Error("all-reduce timing: messages of " + std::to_string(floats) + " f32 exceed the buffers' " +
                  std::to_string(most_floats_));
    const Reduce reduce = kind == AllReduceKind::fixed_order ? fixed_order(floats) : plain(floats);
    return replay == AllReduceReplay::graph ? time_graph(reduce) : time_eager(reduce);
  }

  bool matches_host_sum(size_t floats) {
    std::vector<std::vector<float>> results(static_cast<size_t>(count_));
    on_every_rank([&](int r) {
      Rank& s = state_[size_t(r)];
      s.device->make_current();
      group_->all_reduce(r, s.buffers[0], s.gathered[0], floats, s.stream->handle());
      results[size_t(r)].resize(floats);
      FS_CU(memcpy_dtoh_async, results[size_t(r)].data(), as_device(s.buffers[0]), floats * sizeof(float),
            s.stream->handle());
      s.stream->synchronize();
      group_->check(r);
    });
    std::vector<float> gathered, expected(floats);
    for (int r = 0; r < count_; ++r) {
      const auto p = partial(r, floats);
      gathered.insert(gathered.end(), p.begin(), p.end());
    }
    cuda::rank_sum_host(gathered.data(), count_, floats, expected.data());
    bool same = true;
    for (const auto& got : results)
      same = same && std::memcmp(got.data(), expected.data(), floats * sizeof(float)) == 0;
    return same;
  }

 private:
  // Runs body(rank) on one thread per rank; a failure on any rank ends the program with status 1.
  void on_every_rank(const std::function<void(int)>& body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < count_; ++r)
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

  void setup(int r) {
    Rank& s = state_[size_t(r)];
    s.device = std::make_unique<cuda::Device>(r);
    s.stream = std::make_unique<cuda::Stream>();
    const size_t most = most_floats_ * sizeof(float);
    s.arena = std::make_unique<cuda::DeviceArena>(size_t(messages_) * (1 + count_) * (most + 256) + 4096,
                                                  "all-reduce buffers");
    for (int m = 0; m < messages_; ++m) {
      s.buffers.push_back(as_floats(s.arena->allocate(most, "message")));
      s.gathered.push_back(as_floats(s.arena->allocate(most * size_t(count_), "gathered partials")));
    }
    const auto host = partial(r, most_floats_);
    for (float* b : s.buffers) FS_CU(memcpy_htod_async, as_device(b), host.data(), most, s.stream->handle());
    s.stream->synchronize();
  }

  Reduce fixed_order(size_t n) {
    return [this, n](int r, int m, cuda::CUstream s) {
      group_->all_reduce(r, state_[size_t(r)].buffers[size_t(m)], state_[size_t(r)].gathered[size_t(m)], n, s);
    };
  }

  Reduce plain(size_t n) {
    return [this, n](int r, int m, cuda::CUstream s) {
      float* b = state_[size_t(r)].buffers[size_t(m)];
      cuda::check_nccl(cuda::nccl().all_reduce(b, b, n, cuda::ncclFloat32, cuda::ncclSum, group_->comm(r), s),
                       cuda::nccl_symbol::all_reduce, "rank " + std::to_string(r));
    };
  }

  void one_step(const Reduce& reduce, int r, cuda::CUstream stream) {
    for (int m = 0; m < messages_; ++m) reduce(r, m, stream);
  }

  // Seconds per step, measured on every rank between two barriers, then the rank's communicator checked.
  double timed(int r, const std::function<void()>& step) {
    for (int i = 0; i < kWarmUpSteps; ++i) step();
    state_[size_t(r)].stream->synchronize();
    sync_.arrive_and_wait();
    const auto start = Clock::now();
    for (int i = 0; i < steps_; ++i) step();
    state_[size_t(r)].stream->synchronize();
    sync_.arrive_and_wait();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count() / steps_;
    group_->check(r);
    return seconds;
  }

  // Rank 0's figure of body(rank, stream) run on every rank with its device current.
  double on_rank_zero_clock(const std::function<double(int, cuda::CUstream)>& body) {
    double seconds = 0;
    on_every_rank([&](int r) {
      state_[size_t(r)].device->make_current();
      const double s = body(r, state_[size_t(r)].stream->handle());
      if (r == 0) seconds = s;
    });
    return seconds;
  }

  double time_eager(const Reduce& reduce) {
    return on_rank_zero_clock([&](int r, cuda::CUstream stream) {
      return timed(r, [&] { one_step(reduce, r, stream); });
    });
  }

  double time_graph(const Reduce& reduce) {
    return on_rank_zero_clock([&](int r, cuda::CUstream stream) {
      one_step(reduce, r, stream);  // connections are made outside the capture
      state_[size_t(r)].stream->synchronize();
      sync_.arrive_and_wait();
      cuda::CapturedGraph graph(stream, [&] { one_step(reduce, r, stream); });
      sync_.arrive_and_wait();
      return timed(r, [&] { graph.launch(stream); });
    });
  }

  int count_;
  size_t most_floats_;
  int messages_, steps_;
  std::barrier<> sync_;
  std::vector<Rank> state_;
  std::unique_ptr<cuda::TensorParallelGroup> group_;  // destroyed before the ranks' devices
};

AllReduceTiming::AllReduceTiming(int gpus, size_t most_floats, int messages, int steps)
    : ranks_(std::make_unique<Ranks>(gpus, most_floats, messages, steps)) {}

AllReduceTiming::~AllReduceTiming() = default;

double AllReduceTiming::seconds_per_step(AllReduceKind kind, AllReduceReplay replay, size_t floats) {
  return ranks_->seconds_per_step(kind, replay, floats);
}

bool AllReduceTiming::matches_host_sum(size_t floats) { return ranks_->matches_host_sum(floats); }

AllReduceStepSeconds fixed_order_step_seconds(int gpus, size_t floats, int messages, int steps) {
  AllReduceTiming timing(gpus, floats, messages, steps);
  AllReduceStepSeconds out;
  out.graph = timing.seconds_per_step(AllReduceKind::fixed_order, AllReduceReplay::graph, floats);
  out.eager = timing.seconds_per_step(AllReduceKind::fixed_order, AllReduceReplay::eager, floats);
  return out;
}

}  // namespace fs

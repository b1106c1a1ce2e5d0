#pragma once
// Time of a tensor-parallel step's all-reduces over GPUs 0 .. gpus − 1 (one thread and CUDA stream per GPU): a step
// is `messages` all-reduces of the same number of f32, issued eager or replayed from a CUDA graph, through the
// fixed-order all-reduce the runner uses (all-gather, then the rank-ordered sum) or plain ncclAllReduce. NCCL reads
// NCCL_NVLS_ENABLE when the first communicator is made: the caller sets it before.
#include <cstddef>
#include <memory>

namespace fs {

enum class AllReduceKind { fixed_order, nccl };
enum class AllReduceReplay { eager, graph };

class AllReduceTiming {
 public:
  // Makes the group's communicators and, per GPU, `messages` buffers of up to `most_floats` f32 holding that rank's
  // random partials (and their all-gather scratch); each figure is the mean over `steps` steps after 5 warm-up steps.
  AllReduceTiming(int gpus, std::size_t most_floats, int messages, int steps);
  ~AllReduceTiming();
  AllReduceTiming(const AllReduceTiming&) = delete;
  AllReduceTiming& operator=(const AllReduceTiming&) = delete;

  // Seconds per step of `messages` all-reduces of `floats` f32 each (at most most_floats), on rank 0's clock between
  // barriers of all ranks.
  double seconds_per_step(AllReduceKind kind, AllReduceReplay replay, std::size_t floats);

  // One fixed-order all-reduce of `floats` f32: true when every rank then holds the host's rank-ordered sum, bit for
  // bit.
  bool matches_host_sum(std::size_t floats);

 private:
  class Ranks;
  std::unique_ptr<Ranks> ranks_;
};

// Seconds per step of the fixed-order all-reduce, replayed from a CUDA graph and eager.
struct AllReduceStepSeconds {
  double graph = 0, eager = 0;
};

// `messages` fixed-order all-reduces of `floats` f32 per step over GPUs 0 .. gpus − 1, `steps` steps per figure.
AllReduceStepSeconds fixed_order_step_seconds(int gpus, std::size_t floats, int messages, int steps);

}  // namespace fs

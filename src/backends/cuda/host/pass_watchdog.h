#pragma once
// The watchdog of a tensor-parallel pass: aborts the group's communicators when the pass outlives its deadline or a
// communicator reports an asynchronous error, which releases ranks waiting on their GPU for a peer that never comes.
#include <chrono>
#include <string>
#include <vector>

#include "backends/cuda/host/tensor_parallel_group.h"

namespace fs::cuda {

// How long a pass may run, and how often the communicators' asynchronous errors are read meanwhile.
struct PassDeadline {
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  std::chrono::milliseconds poll{std::chrono::milliseconds(250)};
};

inline constexpr const char* kPassTimeoutVariable = "FOLDSERVE_TP_PASS_TIMEOUT_S";

// The default deadline, its timeout replaced by FOLDSERVE_TP_PASS_TIMEOUT_S (seconds, may be fractional) when set;
// throws fs::Error naming the variable when that is not a positive number.
PassDeadline pass_deadline_from_env();

// "0.25 s", "60 s".
std::string seconds_text(std::chrono::milliseconds duration);

class PassWatchdog {
 public:
  // Starts the pass's clock.
  PassWatchdog(TensorParallelGroup& group, const PassDeadline& deadline);

  // How often watch() is to be called while ranks have not returned.
  std::chrono::milliseconds period() const;
  // Called while the ranks in `unfinished` have not returned: aborts the group once the deadline has passed or a
  // communicator reported an asynchronous error. Does nothing after it fired; never throws.
  void watch(const std::vector<int>& unfinished);
  // Why it aborted the group, naming the ranks that had not returned; empty when it did not.
  const std::string& fired() const { return fired_; }

 private:
  void fire(const std::string& why, const std::vector<int>& unfinished);

  TensorParallelGroup& group_;
  PassDeadline deadline_;
  std::chrono::steady_clock::time_point start_;
  std::string fired_;
};

}  // namespace fs::cuda

#pragma once
// One worker thread per tensor-parallel rank: a job runs on every rank's thread at once and the caller waits for all.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"

namespace fs::cuda {

// What a rank throws when it stops because a peer failed; RankWorkers::run reports the peer's error instead.
struct RankStopped : Error {
  using Error::Error;
};

class RankWorkers {
 public:
  // Called with the ranks whose job has not returned yet.
  using Watch = std::function<void(const std::vector<int>& unfinished)>;

  explicit RankWorkers(int ranks);
  ~RankWorkers();
  RankWorkers(const RankWorkers&) = delete;
  RankWorkers& operator=(const RankWorkers&) = delete;

  int ranks() const { return int(threads_.size()); }
  // Runs job(rank) on each rank's thread; after all return, rethrows the error of the rank that failed first as
  // fs::Error naming the rank (the first that did not stop because of a peer, if any).
  void run(const std::function<void(int)>& job);
  // run, calling watch(unfinished) on the caller's thread every `period` while some rank has not returned (a watchdog
  // that may release stuck ranks; it must not throw); the workers' lock is not held during the call.
  void run(const std::function<void(int)>& job, std::chrono::milliseconds period, const Watch& watch);

 private:
  void loop(int rank);

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable start_, finished_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  std::vector<bool> running_;
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<int> failed_;  // ranks in the order they failed
};

}  // namespace fs::cuda

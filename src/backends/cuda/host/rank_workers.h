#pragma once
// One worker thread per tensor-parallel rank: a job runs on every rank's thread at once and the caller waits for all.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <algorithm>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fs::cuda {

class RankWorkers {
 public:
  explicit RankWorkers(int ranks);
  ~RankWorkers();
  RankWorkers(const RankWorkers&) = delete;
  RankWorkers& operator=(const RankWorkers&) = delete;

  int ranks() const { return int(threads_.size()); }
  // Runs job(rank) on each rank's thread; after all return, rethrows the lowest failing rank's error as fs::Error
  // naming the rank.
  void run(const std::function<void(int)>& job);

 private:
  void loop(int rank);

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable start_, finished_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace fs::cuda

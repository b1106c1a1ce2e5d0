#pragma once
// A fixed pool of worker threads that runs a loop body over index ranges.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fs {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // Splits [0, n) into size() contiguous ranges and runs body(begin, end) on each; the caller runs one.
  // Workers and the caller spin for a short window before they sleep, so back-to-back calls skip the wake-up.
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& body);

  // Workers asleep on the condition variable (past their spin window), for tests.
  int parked_workers() const { return parked_.load(); }

  // The calling thread's pool: the one a ThreadPool::Use on this thread installed, else the process-wide pool
  // (sized by FOLDSERVE_THREADS or the hardware).
  static ThreadPool& global();

  // Makes `pool` the calling thread's pool (what global() returns there) while it lives.
  class Use {
   public:
    explicit Use(ThreadPool& pool);
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    ThreadPool* previous_;
  };

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t, size_t)>* body_ = nullptr;
  size_t n_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> parked_{0};
  std::atomic<bool> stop_{false};
  std::mutex run_mu_;
};

}  // namespace fs

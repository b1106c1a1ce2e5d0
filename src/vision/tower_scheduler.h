#pragma once
// Image work (decode, preprocess, tower) off the engine's round loop: one job at a time on a thread of low
// scheduling priority with a thread pool of its own, so the engine's rounds never wait for the tower's loops and
// get the cores whenever they want them. A waiting caller can cancel its job.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "models/encode_cancel.h"

namespace fs::vision {

class TowerScheduler {
 public:
  using Job = std::function<void(const CancelFlag& cancel)>;

  // `threads`: size of the jobs' thread pool; `nice`: the scheduling niceness of the job thread and its pool
  // (19: run on what the rest of the process leaves).
  TowerScheduler(int threads, int nice);
  ~TowerScheduler();
  TowerScheduler(const TowerScheduler&) = delete;
  TowerScheduler& operator=(const TowerScheduler&) = delete;

  // Runs `job` after the jobs queued before it and waits for it here; the job's exceptions come back here.
  // `should_stop` is polled every `poll` while waiting: once true, a queued job is dropped and a running one is
  // told to stop through its flag (run waits for it), and run throws EncodeCancelled.
  void run(const Job& job, const std::function<bool()>& should_stop,
           std::chrono::milliseconds poll = std::chrono::milliseconds(20));

  // Jobs dropped or stopped by their caller so far.
  uint64_t cancelled() const;

 private:
  struct Task;
  void thread_loop(int threads, int nice);

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool stop_ = false;
  uint64_t cancelled_ = 0;
  std::thread thread_;
};

}  // namespace fs::vision

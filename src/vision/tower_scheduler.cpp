#include "vision/tower_scheduler.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <exception>

#include "core/thread_pool.h"

namespace fs::vision {

struct TowerScheduler::Task {
  const Job* job = nullptr;
  CancelFlag cancel{false};
  bool done = false;
  std::exception_ptr error;
  std::condition_variable finished;
};

TowerScheduler::TowerScheduler(int threads, int nice)
    : thread_([this, threads, nice] { thread_loop(std::max(1, threads), nice); }) {}

TowerScheduler::~TowerScheduler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void TowerScheduler::thread_loop(int threads, int nice) {
  // Linux niceness is per thread, and threads created afterwards (the pool's workers) inherit it.
  if (nice != 0) ::setpriority(PRIO_PROCESS, ::gettid(), nice);
  ThreadPool pool(threads);
  ThreadPool::Use use(pool);
  for (;;) {
    std::shared_ptr<Task> task;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      throw_if_cancelled(&task->cancel);
      (*task->job)(task->cancel);
    } catch (...) {
      task->error = std::current_exception();
    }
    {
      std::lock_guard lock(mu_);
      task->done = true;
    }
    task->finished.notify_all();
  }
}

void TowerScheduler::run(const Job& job, const std::function<bool()>& should_stop, std::chrono::milliseconds poll) {
  auto task = std::make_shared<Task>();
  task->job = &job;
  std::unique_lock lock(mu_);
  queue_.push_back(task);
  wake_.notify_one();
  bool stopping = false;
  while (!task->done) {
    task->finished.wait_for(lock, poll);
    if (task->done || stopping || !should_stop || !should_stop()) continue;
    stopping = true;
    ++cancelled_;
    task->cancel = true;
    auto queued = std::find(queue_.begin(), queue_.end(), task);
    if (queued != queue_.end()) {
      queue_.erase(queued);
      throw EncodeCancelled("the image job was cancelled before it started");
    }
  }
  if (stopping) throw EncodeCancelled("the image job was cancelled");
  if (task->error) std::rethrow_exception(task->error);
}

uint64_t TowerScheduler::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

}  // namespace fs::vision

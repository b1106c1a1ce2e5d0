#include "core/thread_pool.h"

#include <cstdlib>

namespace fs {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

static void run_share(const std::function<void(size_t, size_t)>& body, size_t n, int index, int parts) {
  size_t begin = n * size_t(index) / size_t(parts);
  size_t end = n * size_t(index + 1) / size_t(parts);
  if (begin < end) body(begin, end);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t)>* body;
    size_t n;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      body = body_;
      n = n_;
    }
    run_share(*body, n, index, size());
    {
      std::lock_guard lock(mu_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& body) {
  if (workers_.empty() || n < 2) {
    if (n) body(0, n);
    return;
  }
  std::lock_guard run_lock(run_mu_);
  {
    std::lock_guard lock(mu_);
    body_ = &body;
    n_ = n;
    pending_ = int(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  run_share(body, n, 0, size());
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
}

namespace {
thread_local ThreadPool* installed_pool = nullptr;
}

ThreadPool::Use::Use(ThreadPool& pool) : previous_(installed_pool) { installed_pool = &pool; }

ThreadPool::Use::~Use() { installed_pool = previous_; }

ThreadPool& ThreadPool::global() {
  if (installed_pool) return *installed_pool;
  static ThreadPool pool([] {
    if (const char* env = std::getenv("FOLDSERVE_THREADS")) {
      int n = std::atoi(env);
      if (n > 0) return n;
    }
    unsigned hw = std::thread::hardware_concurrency();
    return hw ? int(hw) : 1;
  }());
  return pool;
}

}  // namespace fs

#include "core/thread_pool.h"

#include <chrono>
#include <cstdlib>

namespace fs {

namespace {

// How long a worker waits for the next call, and the caller for its workers, before sleeping.
constexpr std::chrono::microseconds kSpinWindow{50};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until ready() or the spin window has passed; returns ready(). Yields between clock checks, so a thread
// that waits for this core (another pool thread on a busy machine) gets it.
template <class Ready>
bool spin_until(const Ready& ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinWindow;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
    std::this_thread::yield();
  }
}

void run_share(const std::function<void(size_t, size_t)>& body, size_t n, int index, int parts) {
  size_t begin = n * size_t(index) / size_t(parts);
  size_t end = n * size_t(index + 1) / size_t(parts);
  if (begin < end) body(begin, end);
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    ++generation_;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto posted = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(posted)) {
      std::unique_lock lock(mu_);
      ++parked_;
      wake_.wait(lock, posted);
      --parked_;
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    run_share(*body_, n_, index, size());
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mu_);
      done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& body) {
  if (workers_.empty() || n < 2) {
    if (n) body(0, n);
    return;
  }
  std::lock_guard run_lock(run_mu_);
  body_ = &body;
  n_ = n;
  pending_.store(int(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_share(body, n, 0, size());
  auto finished = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (spin_until(finished)) return;
  std::unique_lock lock(mu_);
  done_.wait(lock, finished);
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

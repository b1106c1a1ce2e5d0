#include "backends/cuda/host/rank_workers.h"

#include <string>

#include "core/error.h"

namespace fs::cuda {

namespace {

bool stopped_for_peer(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const RankStopped&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

RankWorkers::RankWorkers(int ranks) : running_(size_t(ranks), false), errors_(size_t(ranks)) {
  for (int r = 0; r < ranks; ++r) threads_.emplace_back([this, r] { loop(r); });
}

RankWorkers::~RankWorkers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& t : threads_) t.join();
}

void RankWorkers::run(const std::function<void(int)>& job) { run(job, std::chrono::milliseconds(0), nullptr); }

void RankWorkers::run(const std::function<void(int)>& job, std::chrono::milliseconds period, const Watch& watch) {
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &job;
  pending_ = ranks();
  std::fill(running_.begin(), running_.end(), true);
  std::fill(errors_.begin(), errors_.end(), nullptr);
  failed_.clear();
  ++generation_;
  start_.notify_all();
  const auto done = [&] { return pending_ == 0; };
  if (!watch) finished_.wait(lock, done);
  while (watch && !finished_.wait_for(lock, period, done)) {
    std::vector<int> unfinished;
    for (int r = 0; r < ranks(); ++r)
      if (running_[size_t(r)]) unfinished.push_back(r);
    lock.unlock();
    watch(unfinished);
    lock.lock();
  }
  job_ = nullptr;
  if (failed_.empty()) return;
  int first = failed_.front();
  for (auto it = failed_.rbegin(); it != failed_.rend(); ++it)
    if (!stopped_for_peer(errors_[size_t(*it)])) first = *it;
  try {
    std::rethrow_exception(errors_[size_t(first)]);
  } catch (const std::exception& e) {
    throw Error("tensor-parallel rank " + std::to_string(first) + " of " + std::to_string(ranks()) + ": " + e.what());
  }
}

void RankWorkers::loop(int rank) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const std::function<void(int)>* job = job_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*job)(rank);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    running_[size_t(rank)] = false;
    if (error) {
      errors_[size_t(rank)] = error;
      failed_.push_back(rank);
    }
    if (--pending_ == 0) finished_.notify_all();
  }
}

}  // namespace fs::cuda

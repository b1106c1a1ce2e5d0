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

RankWorkers::RankWorkers(int ranks) : errors_(size_t(ranks)) {
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

void RankWorkers::run(const std::function<void(int)>& job) {
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &job;
  pending_ = ranks();
  std::fill(errors_.begin(), errors_.end(), nullptr);
  failed_.clear();
  ++generation_;
  start_.notify_all();
  finished_.wait(lock, [&] { return pending_ == 0; });
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
    if (error) {
      errors_[size_t(rank)] = error;
      failed_.push_back(rank);
    }
    if (--pending_ == 0) finished_.notify_all();
  }
}

}  // namespace fs::cuda

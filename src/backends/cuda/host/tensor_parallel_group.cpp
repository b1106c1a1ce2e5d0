// Communicators of the tensor-parallel ranks, their fixed-order all-reduce, and how a pass with a failing rank ends.
#include "backends/cuda/host/tensor_parallel_group.h"

#include <algorithm>
#include <string>
#include <utility>

#include "backends/cuda/host/nccl_table.h"
#include "backends/cuda/host/rank_workers.h"
#include "core/error.h"

namespace fs::cuda {

namespace {

std::string device_list(const std::vector<int>& devices) {
  std::string text;
  for (int d : devices) text += (text.empty() ? "" : ",") + std::to_string(d);
  return text;
}

std::string rank_name(int rank, int ranks) { return "rank " + std::to_string(rank) + " of " + std::to_string(ranks); }

}  // namespace

TensorParallelGroup::TensorParallelGroup(std::vector<int> devices, RankSumLaunch rank_sum)
    : devices_(std::move(devices)), rank_sum_(std::move(rank_sum)), issued_(devices_.size(), 0) {
  if (devices_.empty()) throw Error("a tensor-parallel group needs at least one device");
  std::vector<ncclComm_t> comms(devices_.size(), nullptr);
  check_nccl(nccl().comm_init_all(comms.data(), int(devices_.size()), devices_.data()), nccl_symbol::comm_init_all,
             "devices " + device_list(devices_));
  comms_ = std::move(comms);
}

TensorParallelGroup::~TensorParallelGroup() {
  for (ncclComm_t comm : comms_) {
    if (!comm) continue;
    if (failed_) nccl().comm_abort(comm);
    else nccl().comm_destroy(comm);
  }
}

void TensorParallelGroup::all_reduce(int rank, float* buffer, float* gathered, std::size_t n, CUstream stream) const {
  const ncclComm_t comm = admit(rank, true);
  check_rank(nccl().all_gather(buffer, gathered, n, ncclFloat32, comm, stream), nccl_symbol::all_gather, rank);
  rank_sum_(gathered, ranks(), n, buffer, stream);
}

void TensorParallelGroup::all_gather(int rank, const float* send, float* gathered, std::size_t n,
                                     CUstream stream) const {
  const ncclComm_t comm = admit(rank, true);
  check_rank(nccl().all_gather(send, gathered, n, ncclFloat32, comm, stream), nccl_symbol::all_gather, rank);
}

void TensorParallelGroup::check(int rank) const {
  const ncclComm_t comm = admit(rank, false);
  ncclResult_t error = ncclSuccess;
  check_rank(nccl().comm_get_async_error(comm, &error), nccl_symbol::comm_get_async_error, rank);
  check_rank(error, "NCCL communicator", rank);
}

std::string TensorParallelGroup::async_error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_.empty()) return {};
  for (int rank = 0; rank < ranks(); ++rank) {
    ncclResult_t error = ncclSuccess;
    const ncclResult_t result = nccl().comm_get_async_error(comms_[std::size_t(rank)], &error);
    if (result == ncclSuccess && error == ncclSuccess) continue;
    try {
      check_nccl(result != ncclSuccess ? result : error,
                 result != ncclSuccess ? nccl_symbol::comm_get_async_error : "NCCL communicator",
                 rank_name(rank, ranks()));
    } catch (const Error& e) {
      return e.what();
    }
  }
  return {};
}

void TensorParallelGroup::begin_pass() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_.empty())
    throw Error("the tensor-parallel group was stopped after a failure (" + aborted_ +
                "); restart foldserve to run on it again");
  failed_rank_ = -1;
  waiting_ = 0;
}

void TensorParallelGroup::fail_pass(int rank) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_rank_ < 0) failed_rank_ = rank;
  }
  ready_.notify_all();
}

void TensorParallelGroup::ready(int rank) const {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t round = rounds_ready_;
  const auto stopped = [&] {
    return RankStopped(rank_name(rank, ranks()) + " stopped: " + rank_name(failed_rank_, ranks()) + " failed");
  };
  if (failed_rank_ >= 0) throw stopped();
  if (++waiting_ == ranks()) {
    waiting_ = 0;
    ++rounds_ready_;
    ready_.notify_all();
    return;
  }
  ready_.wait(lock, [&] { return rounds_ready_ != round || failed_rank_ >= 0; });
  if (rounds_ready_ == round) throw stopped();
}

bool TensorParallelGroup::in_step() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !failed_ && std::all_of(issued_.begin(), issued_.end(), [&](std::size_t n) { return n == issued_.front(); });
}

void TensorParallelGroup::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_.empty()) return;
  aborted_ = why.empty() ? "unknown" : why;
  failed_ = true;
  for (ncclComm_t& comm : comms_) {
    nccl().comm_abort(comm);
    comm = nullptr;
  }
}

bool TensorParallelGroup::aborted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !aborted_.empty();
}

ncclComm_t TensorParallelGroup::admit(int rank, bool counting) const {
  if (rank < 0 || rank >= ranks()) throw Error("tensor-parallel rank " + std::to_string(rank) + " out of range");
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_.empty())
    throw Error(rank_name(rank, ranks()) + ": the tensor-parallel group was stopped after a failure (" + aborted_ + ")");
  if (counting) {
    if (failed_rank_ >= 0)
      throw RankStopped(rank_name(rank, ranks()) + " stopped: " + rank_name(failed_rank_, ranks()) + " failed");
    ++issued_[std::size_t(rank)];
  }
  return comms_[std::size_t(rank)];
}

// A peer's failure (ncclRemoteError) is a RankStopped, so the pass reports the rank that failed itself.
void TensorParallelGroup::check_rank(ncclResult_t result, const char* call, int rank) const {
  if (result == ncclSuccess) return;
  failed_ = true;
  try {
    check_nccl(result, call, rank_name(rank, ranks()));
  } catch (const Error& e) {
    if (result == ncclRemoteError) throw RankStopped(e.what());
    throw;
  }
}

}  // namespace fs::cuda

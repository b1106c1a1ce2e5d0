#pragma once
// The GPUs of one host as tensor-parallel ranks: one NCCL communicator per rank, and an all-reduce whose result is the
// same bits on every rank and independent of NCCL's algorithm (all-gather the partials, then sum them in rank order on
// each rank).
#include <atomic>
#include <cstddef>
#include <functional>
#include <vector>

#include "backends/cuda/host/driver_types.h"
#include "backends/cuda/host/nccl_types.h"

namespace fs::cuda {

// Queues out[i] = rank-ordered sum of gathered [ranks, n] (rank_sum_order.h) on `stream`.
using RankSumLaunch = std::function<void(const float* gathered, int ranks, std::size_t n, float* out, CUstream)>;

class TensorParallelGroup {
 public:
  // Rank r drives devices[r]; creates the communicators with ncclCommInitAll. Throws fs::Error naming the device list
  // when NCCL refuses.
  TensorParallelGroup(std::vector<int> devices, RankSumLaunch rank_sum);
  // Destroys the communicators, or aborts them once any rank has failed (a peer may never arrive).
  ~TensorParallelGroup();
  TensorParallelGroup(const TensorParallelGroup&) = delete;
  TensorParallelGroup& operator=(const TensorParallelGroup&) = delete;

  int ranks() const { return int(comms_.size()); }
  int device(int rank) const { return devices_[std::size_t(rank)]; }
  ncclComm_t comm(int rank) const { return comms_[std::size_t(rank)]; }

  // Called by rank `rank`'s thread with its device current: buffer[n] holds the rank's partial and is replaced by the
  // sum over ranks; gathered is that rank's scratch of ranks · n floats. Queued on `stream` (capturable in a CUDA
  // graph). Every rank must make the same calls in the same order. Throws fs::Error naming the rank when NCCL reports a
  // failure, its own or a peer's.
  void all_reduce(int rank, float* buffer, float* gathered, std::size_t n, CUstream stream) const;

  // gathered[r · n .. (r + 1) · n) = rank r's send[0 .. n), on every rank; queued on `stream` like all_reduce.
  void all_gather(int rank, const float* send, float* gathered, std::size_t n, CUstream stream) const;

  // Throws fs::Error naming the rank if its communicator has recorded an asynchronous error (a peer failed, a kernel
  // faulted); call after synchronizing the rank's stream.
  void check(int rank) const;

 private:
  // check_nccl, marking the group failed first when `result` is an error.
  void check_rank(ncclResult_t result, const char* call, int rank) const;

  std::vector<int> devices_;
  RankSumLaunch rank_sum_;
  std::vector<ncclComm_t> comms_;
  mutable std::atomic<bool> failed_{false};
};

}  // namespace fs::cuda

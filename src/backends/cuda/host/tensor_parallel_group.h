#pragma once
// The GPUs of one host as tensor-parallel ranks: one NCCL communicator per rank, and an all-reduce whose result is the
// same bits on every rank and independent of NCCL's algorithm (all-gather the partials, then sum them in rank order on
// each rank).
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
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
  // failure (RankStopped, an fs::Error, when it is a peer's); throws RankStopped without calling NCCL once a peer has
  // failed in this pass, and fs::Error once the group is aborted.
  void all_reduce(int rank, float* buffer, float* gathered, std::size_t n, CUstream stream) const;

  // gathered[r · n .. (r + 1) · n) = rank r's send[0 .. n), on every rank; queued on `stream` like all_reduce.
  void all_gather(int rank, const float* send, float* gathered, std::size_t n, CUstream stream) const;

  // Throws fs::Error naming the rank if its communicator has recorded an asynchronous error (a peer failed, a kernel
  // faulted); call after synchronizing the rank's stream.
  void check(int rank) const;
  // The first asynchronous error a communicator has recorded, as "rank R of N: <NCCL's text> (n)"; empty when none or
  // once the group is aborted. Safe while ranks are issuing collectives.
  std::string async_error() const;

  // A pass is one job run by every rank together (tensor_parallel_pass.h). begin_pass forgets the last pass's failed
  // rank; throws fs::Error once the group is aborted.
  void begin_pass();
  // Rank `rank` failed in this pass: ranks waiting in ready() and their later collectives of the pass throw
  // RankStopped instead of issuing calls the failed rank will never match.
  void fail_pass(int rank);
  // Returns once every rank has called ready() (once per round, before its first collective); throws RankStopped
  // when a rank fails first.
  void ready(int rank) const;
  // True while NCCL has reported no error and every rank has issued the same number of collectives: the
  // communicators are in step and the next pass can use them.
  bool in_step() const;
  // Aborts the communicators now (a peer may be waiting on its GPU for a call that never comes); every later call
  // throws fs::Error naming `why`.
  void abort(const std::string& why);
  bool aborted() const;

 private:
  // check_nccl, marking the group failed first when `result` is an error.
  void check_rank(ncclResult_t result, const char* call, int rank) const;
  // Throws when the group is aborted or (counting) when a peer failed in this pass; else counts one collective and
  // returns the rank's communicator.
  ncclComm_t admit(int rank, bool counting) const;

  std::vector<int> devices_;
  RankSumLaunch rank_sum_;
  std::vector<ncclComm_t> comms_;
  mutable std::atomic<bool> failed_{false};
  mutable std::mutex mutex_;
  mutable std::condition_variable ready_;
  mutable std::vector<std::size_t> issued_;  // collectives each rank has issued
  mutable int waiting_ = 0;                  // ranks in ready() of the current round
  mutable uint64_t rounds_ready_ = 0;
  int failed_rank_ = -1;  // of the current pass
  std::string aborted_;   // why, once aborted
};

}  // namespace fs::cuda

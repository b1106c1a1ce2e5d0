#pragma once
// One pass of a tensor-parallel model: a job run by every rank together, and what a failing rank leaves behind.
#include <functional>

#include "backends/cuda/host/pass_watchdog.h"
#include "backends/cuda/host/rank_workers.h"
#include "backends/cuda/host/tensor_parallel_group.h"

namespace fs::cuda {

// Runs job(rank) on every rank's worker. When a rank throws, its peers stop at their next collective or round
// (RankStopped) and the failing rank's error is rethrown naming it, after every rank has returned. A failure that
// leaves the communicators in step (every rank issued the same collectives, NCCL reported nothing) is transient: the
// next pass runs. Otherwise the group is aborted first, so a peer waiting on its GPU for a call that never comes is
// released and every later pass is refused with fs::Error naming the first failure. Throws without running the job
// when the group is aborted. A pass that outlives `deadline` or whose communicators report an asynchronous error is
// stopped by aborting the group (pass_watchdog.h) and fails with the watchdog's reason, naming the ranks that had not
// returned, once they have (the abort releases ranks waiting on NCCL or their GPU, not ones stuck elsewhere).
void run_tensor_parallel(RankWorkers& workers, TensorParallelGroup& group, const std::function<void(int)>& job,
                         const PassDeadline& deadline = {});

}  // namespace fs::cuda

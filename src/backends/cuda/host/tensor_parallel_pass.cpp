// A pass over every rank: peers stop when one fails; the group is aborted when they fell out of step or the pass's
// watchdog fires.
#include "backends/cuda/host/tensor_parallel_pass.h"

#include <vector>

#include "core/error.h"

namespace fs::cuda {

void run_tensor_parallel(RankWorkers& workers, TensorParallelGroup& group, const std::function<void(int)>& job,
                         const PassDeadline& deadline) {
  group.begin_pass();
  PassWatchdog watchdog(group, deadline);
  const auto rank_job = [&](int rank) {
    try {
      job(rank);
    } catch (const RankStopped&) {
      throw;
    } catch (...) {
      group.fail_pass(rank);
      throw;
    }
  };
  const auto watch = [&](const std::vector<int>& unfinished) { watchdog.watch(unfinished); };
  try {
    workers.run(rank_job, watchdog.period(), watch);
  } catch (const std::exception& e) {
    if (!watchdog.fired().empty()) throw Error(watchdog.fired());
    if (!group.in_step()) group.abort(e.what());
    throw;
  }
  // Ranks released by the abort may return normally, with partial results.
  if (!watchdog.fired().empty()) throw Error(watchdog.fired());
}

}  // namespace fs::cuda

// A pass over every rank: peers stop when one fails; the group is aborted when they fell out of step.
#include "backends/cuda/host/tensor_parallel_pass.h"

#include "core/error.h"

namespace fs::cuda {

void run_tensor_parallel(RankWorkers& workers, TensorParallelGroup& group, const std::function<void(int)>& job) {
  group.begin_pass();
  try {
    workers.run([&](int rank) {
      try {
        job(rank);
      } catch (const RankStopped&) {
        throw;
      } catch (...) {
        group.fail_pass(rank);
        throw;
      }
    });
  } catch (const std::exception& e) {
    if (!group.in_step()) group.abort(e.what());
    throw;
  }
}

}  // namespace fs::cuda

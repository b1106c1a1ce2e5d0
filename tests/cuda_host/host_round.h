#pragma once
// One rank's tensor-parallel round on the host (fake NCCL): the rank sum on the CPU, and every collective of
// round_collectives issued with partials of rank + 1.
#include <cstddef>
#include <vector>

#include "backends/cuda/host/rank_sum_order.h"
#include "backends/cuda/host/round_collectives.h"
#include "backends/cuda/host/tensor_parallel_group.h"

namespace fs::cuda::test {

inline RankSumLaunch host_rank_sum() {
  return [](const float* gathered, int ranks, std::size_t n, float* out, CUstream) {
    rank_sum_host(gathered, ranks, n, out);
  };
}

// Returns the last all-reduced rows (the sum over ranks of rank + 1).
inline std::vector<float> run_host_round(const TensorParallelGroup& group, int rank, const RoundShape& shape) {
  RoundCollectives round(group, rank, shape);
  std::vector<float> stream;
  for (const RoundCollective& c : round_collectives(shape)) {
    std::vector<float> buffer(c.count, float(rank + 1)), gathered(c.count * std::size_t(group.ranks()));
    if (c.gather) round.all_gather(buffer.data(), gathered.data(), c.count, nullptr);
    else round.all_reduce(buffer.data(), gathered.data(), c.count, nullptr);
    if (!c.gather) stream = buffer;
  }
  round.finish();
  return stream;
}

}  // namespace fs::cuda::test

// Host reference of the rank-ordered sum.
#include "backends/cuda/host/rank_sum_order.h"

namespace fs::cuda {

void rank_sum_host(const float* gathered, int ranks, std::size_t n, float* out) {
  for (std::size_t i = 0; i < n; ++i) {
    float sum = gathered[i];
    for (int r = 1; r < ranks; ++r) sum += gathered[std::size_t(r) * n + i];
    out[i] = sum;
  }
}

}  // namespace fs::cuda

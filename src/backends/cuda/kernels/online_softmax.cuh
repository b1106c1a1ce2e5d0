#pragma once
// The online-softmax step the tensor-core attention kernels share, for one of a lane's two mma rows.
#include <cmath>

namespace fs::cuda::kernels {

// Folds this lane's maximum of a new key block (log2 units) into the row's running max `m` (reduced over the 4
// lanes holding the row), scales the running sum `l` and the output slots `o[·][2h]`, `o[·][2h+1]` by the
// correction, and returns the base the block's exponents subtract (0 while every key so far is masked).
template <int N>
__device__ __forceinline__ float online_softmax_rescale(float& m, float& l, float (&o)[N][4], int h, float mx) {
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float m_new = fmaxf(m, mx);
  const float base = m_new == -INFINITY ? 0.0f : m_new;
  const float corr = m == m_new ? 1.0f : exp2f(m - base);
  m = m_new;
  l *= corr;
#pragma unroll
  for (int n = 0; n < N; ++n) {
    o[n][2 * h] *= corr;
    o[n][2 * h + 1] *= corr;
  }
  return base;
}

}  // namespace fs::cuda::kernels

#pragma once
// cuBLASLt as the peer of the GEMM table: the same product as our `gemm` (bf16 x and w, f32 y), split-K off, the
// default heuristic's best algorithm, timed the way the table times ours.
#include <cstdint>
#include <optional>
#include <vector>

#include "backends/cuda/host/bf16_gemm.h"
#include "backends/cuda/host/device_arena.h"

namespace fs {

class GemmPeer {
 public:
  GemmPeer();

  // Seconds per call of y[m, n] = x[m, k]·w[n, k]ᵀ on `stream`, rotating through `weights` (so the L2 cache never
  // holds them): one warm-up pass over the weights, then the mean of `reps` calls. Empty when cuBLASLt offers no
  // algorithm without split-K for the shape.
  std::optional<double> seconds(cuda::CUdeviceptr x, const std::vector<cuda::CUdeviceptr>& weights, cuda::CUdeviceptr y, int m,
                 int n, int k, int reps, cuda::CUstream stream);

 private:
  static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
  cuda::BlasLtHandle handle_;
  cuda::DeviceArena arena_;
  cuda::DeviceSpan workspace_;
};

}  // namespace fs

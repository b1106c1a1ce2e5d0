// cuBLASLt timing for the GEMM table (see gemm_peer.h).
#include "gemm_peer.h"

#include <chrono>

#include "backends/cuda/host/check.h"
#include "core/error.h"

namespace fs {

GemmPeer::GemmPeer()
    : arena_(kWorkspaceBytes + 4096, "cuBLASLt workspace"), workspace_(arena_.allocate(kWorkspaceBytes, "workspace")) {}

std::optional<double> GemmPeer::seconds(cuda::CUdeviceptr x, const std::vector<cuda::CUdeviceptr>& weights, cuda::CUdeviceptr y,
                                              int m, int n, int k, int reps, cuda::CUstream stream) {
  std::optional<cuda::Bf16GemmPlan> plan;
  try {
    plan.emplace(handle_, std::uint64_t(m), std::uint64_t(n), std::uint64_t(k), kWorkspaceBytes,
                 cuda::Bf16GemmOptions{.f32_output = true, .allow_split_k = false});
  } catch (const Error&) {
    return std::nullopt;  // every algorithm the heuristic offers splits k
  }
  auto call = [&](int i) { plan->run(x, weights[size_t(i) % weights.size()], y, workspace_.ptr, stream); };
  for (size_t i = 0; i < weights.size(); ++i) call(int(i));
  FS_CU(stream_synchronize, stream);
  const auto t = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) call(i);
  FS_CU(stream_synchronize, stream);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count() / reps;
}

}  // namespace fs

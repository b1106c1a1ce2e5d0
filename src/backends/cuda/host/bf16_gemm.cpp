// cuBLASLt bf16 GEMM plans. Row-major Y = X·Wᵀ is computed as the column-major Yᵀ[n,m] = op(W)ᵀ·Xᵀ: A = W with
// TRANSA = T (k×n, ld k), B = X (k×m, ld k), C = D = Y (n×m, ld n).
#include "backends/cuda/host/bf16_gemm.h"

#include <cstdint>
#include <string>

#include "core/error.h"

namespace fs::cuda {

BlasLtHandle::BlasLtHandle() { FS_BLAS(create, &handle_); }

BlasLtHandle::~BlasLtHandle() {
  if (handle_) blaslt().destroy(handle_);
}

Bf16GemmPlan::Bf16GemmPlan(const BlasLtHandle& handle, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                           std::size_t max_workspace_bytes, Bf16GemmOptions options)
    : handle_(handle.get()), m_(m), n_(n), k_(k) {
  std::string shape = "bf16 GEMM m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k);
  if (m == 0 || n == 0 || k == 0) throw Error(shape + ": every dimension must be positive");
  cublasLtMatmulPreference_t preference = nullptr;
  try {
    FS_BLAS(matmul_desc_create, &desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const std::int32_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    FS_BLAS(matmul_desc_set_attribute, desc_, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose));
    FS_BLAS(matmul_desc_set_attribute, desc_, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep));
    FS_BLAS(matrix_layout_create, &w_layout_, CUDA_R_16BF, k, n, static_cast<std::int64_t>(k));
    FS_BLAS(matrix_layout_create, &x_layout_, CUDA_R_16BF, k, m, static_cast<std::int64_t>(k));
    FS_BLAS(matrix_layout_create, &y_layout_, options.f32_output ? CUDA_R_32F : CUDA_R_16BF, n, m,
            static_cast<std::int64_t>(n));
    FS_BLAS(matmul_preference_create, &preference);
    const std::uint64_t workspace_limit = max_workspace_bytes;
    FS_BLAS(matmul_preference_set_attribute, preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_limit,
            sizeof(workspace_limit));
    constexpr int kCandidates = 32;
    cublasLtMatmulHeuristicResult_t results[kCandidates]{};
    int found = 0;
    check_blas(blaslt().matmul_algo_get_heuristic(handle_, desc_, w_layout_, x_layout_, y_layout_, y_layout_,
                                                  preference, options.allow_split_k ? 1 : kCandidates, results,
                                                  &found),
               blaslt_symbol::matmul_algo_get_heuristic, shape);
    // Candidates come best first; without split-K, the first that keeps k in one CTA.
    int pick = 0;
    for (; !options.allow_split_k && pick < found; ++pick) {
      std::int32_t splits = 1;
      std::size_t written = 0;
      check_blas(blaslt().matmul_algo_config_get_attribute(&results[pick].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                           &splits, sizeof(splits), &written),
                 blaslt_symbol::matmul_algo_config_get_attribute, shape);
      if (splits <= 1) break;
    }
    const cublasLtMatmulHeuristicResult_t& result = results[pick < kCandidates ? pick : 0];
    if (found < 1 || pick >= found || result.state != CUBLAS_STATUS_SUCCESS) {
      throw Error(shape + ": cuBLASLt has no algorithm for this shape within " +
                  std::to_string(max_workspace_bytes) + " workspace bytes" +
                  (options.allow_split_k ? "" : " without split-K"));
    }
    algo_ = result.algo;
    workspace_bytes_ = result.workspaceSize;
    blaslt().matmul_preference_destroy(preference);
  } catch (...) {
    if (preference) blaslt().matmul_preference_destroy(preference);
    release();
    throw;
  }
}

Bf16GemmPlan::~Bf16GemmPlan() { release(); }

void Bf16GemmPlan::release() noexcept {
  if (y_layout_) blaslt().matrix_layout_destroy(y_layout_);
  if (x_layout_) blaslt().matrix_layout_destroy(x_layout_);
  if (w_layout_) blaslt().matrix_layout_destroy(w_layout_);
  if (desc_) blaslt().matmul_desc_destroy(desc_);
  y_layout_ = x_layout_ = w_layout_ = nullptr;
  desc_ = nullptr;
}

void Bf16GemmPlan::run(CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, CUdeviceptr workspace, CUstream stream) const {
  const float alpha = 1.0f, beta = 0.0f;
  auto* y_ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(y));
  check_blas(blaslt().matmul(handle_, desc_, &alpha, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(w)),
                             w_layout_, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(x)), x_layout_,
                             &beta, y_ptr, y_layout_, y_ptr, y_layout_, &algo_,
                             reinterpret_cast<void*>(static_cast<std::uintptr_t>(workspace)), workspace_bytes_, stream),
             blaslt_symbol::matmul,
             "bf16 GEMM m=" + std::to_string(m_) + " n=" + std::to_string(n_) + " k=" + std::to_string(k_));
}

}  // namespace fs::cuda

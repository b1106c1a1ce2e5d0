#pragma once
// bf16 GEMM through cuBLASLt: Y[m,n] = X[m,k] · W[n,k]ᵀ on row-major bf16 inputs (Y bf16 or f32), fp32 accumulation, planned once
// per shape (descriptors, layouts and one algorithm chosen by the heuristic) and run many times.
#include <cstddef>
#include <cstdint>

#include "backends/cuda/host/blaslt_table.h"

namespace fs::cuda {

// One cuBLASLt context, destroyed with its owner.
class BlasLtHandle {
 public:
  BlasLtHandle();
  ~BlasLtHandle();
  BlasLtHandle(const BlasLtHandle&) = delete;
  BlasLtHandle& operator=(const BlasLtHandle&) = delete;
  cublasLtHandle_t get() const { return handle_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
};

// Y's element type and whether the algorithm may split k across CTAs (whose reduction order varies with m).
struct Bf16GemmOptions {
  bool f32_output = false;
  bool allow_split_k = true;
};

class Bf16GemmPlan {
 public:
  // Builds the descriptors and picks the heuristic's best algorithm (the best without split-K when the options
  // forbid it); `max_workspace_bytes` bounds the workspace it may use. Throws fs::Error naming the shape when
  // cuBLASLt has no algorithm for it; nothing is left allocated.
  Bf16GemmPlan(const BlasLtHandle& handle, std::uint64_t m, std::uint64_t n, std::uint64_t k,
               std::size_t max_workspace_bytes, Bf16GemmOptions options = {});
  ~Bf16GemmPlan();
  Bf16GemmPlan(const Bf16GemmPlan&) = delete;
  Bf16GemmPlan& operator=(const Bf16GemmPlan&) = delete;

  // Queues Y = X · Wᵀ on `stream`; `workspace` holds at least workspace_bytes().
  void run(CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, CUdeviceptr workspace, CUstream stream) const;
  std::size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  void release() noexcept;

  cublasLtHandle_t handle_;
  std::uint64_t m_, n_, k_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t w_layout_ = nullptr;
  cublasLtMatrixLayout_t x_layout_ = nullptr;
  cublasLtMatrixLayout_t y_layout_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  std::size_t workspace_bytes_ = 0;
};

}  // namespace fs::cuda

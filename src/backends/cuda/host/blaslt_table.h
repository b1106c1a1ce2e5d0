#pragma once
// The few cuBLASLt calls a bf16 GEMM needs, through a table filled from libcublasLt.so.13 (dlopen) or replaced by a
// fake in tests (ScopedBlasLtTable). Types are declared here with cublasLt.h's layouts, so no CUDA header is needed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/cuda/host/driver_types.h"

namespace fs::cuda {

using cublasStatus_t = int;
using cublasLtHandle_t = struct cublasLtContext*;
using cublasLtMatmulDesc_t = struct cublasLtMatmulDescOpaque*;
using cublasLtMatrixLayout_t = struct cublasLtMatrixLayoutOpaque*;
using cublasLtMatmulPreference_t = struct cublasLtMatmulPreferenceOpaque*;

struct cublasLtMatmulAlgo_t {
  std::uint64_t data[8];
};

struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  std::size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
static_assert(sizeof(cublasLtMatmulHeuristicResult_t) == 96, "layout must match cublasLt.h");

inline constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
inline constexpr cublasStatus_t CUBLAS_STATUS_NOT_INITIALIZED = 1;
inline constexpr cublasStatus_t CUBLAS_STATUS_ALLOC_FAILED = 3;
inline constexpr cublasStatus_t CUBLAS_STATUS_INVALID_VALUE = 7;
inline constexpr cublasStatus_t CUBLAS_STATUS_EXECUTION_FAILED = 13;
inline constexpr cublasStatus_t CUBLAS_STATUS_NOT_SUPPORTED = 15;
inline constexpr int CUBLAS_OP_N = 0;
inline constexpr int CUBLAS_OP_T = 1;
inline constexpr int CUBLAS_COMPUTE_32F = 68;
inline constexpr int CUDA_R_32F = 0;
inline constexpr int CUDA_R_16BF = 14;
inline constexpr int CUBLASLT_MATMUL_DESC_TRANSA = 3;
inline constexpr int CUBLASLT_MATMUL_DESC_TRANSB = 4;
inline constexpr int CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1;
inline constexpr int CUBLASLT_ALGO_CONFIG_SPLITK_NUM = 2;

// X(member, "exported symbol", return type, parameter list)
#define FS_CUDA_BLASLT_CALLS(X)                                                                                   \
  X(create, "cublasLtCreate", cublasStatus_t, (cublasLtHandle_t * handle))                                       \
  X(destroy, "cublasLtDestroy", cublasStatus_t, (cublasLtHandle_t handle))                                       \
  X(get_status_name, "cublasLtGetStatusName", const char*, (cublasStatus_t status))                              \
  X(get_status_string, "cublasLtGetStatusString", const char*, (cublasStatus_t status))                          \
  X(matmul_desc_create, "cublasLtMatmulDescCreate", cublasStatus_t,                                              \
    (cublasLtMatmulDesc_t * desc, int compute_type, int scale_type))                                             \
  X(matmul_desc_destroy, "cublasLtMatmulDescDestroy", cublasStatus_t, (cublasLtMatmulDesc_t desc))               \
  X(matmul_desc_set_attribute, "cublasLtMatmulDescSetAttribute", cublasStatus_t,                                 \
    (cublasLtMatmulDesc_t desc, int attribute, const void* value, std::size_t bytes))                            \
  X(matrix_layout_create, "cublasLtMatrixLayoutCreate", cublasStatus_t,                                          \
    (cublasLtMatrixLayout_t * layout, int type, std::uint64_t rows, std::uint64_t cols, std::int64_t ld))        \
  X(matrix_layout_destroy, "cublasLtMatrixLayoutDestroy", cublasStatus_t, (cublasLtMatrixLayout_t layout))       \
  X(matmul_preference_create, "cublasLtMatmulPreferenceCreate", cublasStatus_t,                                  \
    (cublasLtMatmulPreference_t * preference))                                                                   \
  X(matmul_preference_destroy, "cublasLtMatmulPreferenceDestroy", cublasStatus_t,                                \
    (cublasLtMatmulPreference_t preference))                                                                     \
  X(matmul_preference_set_attribute, "cublasLtMatmulPreferenceSetAttribute", cublasStatus_t,                     \
    (cublasLtMatmulPreference_t preference, int attribute, const void* value, std::size_t bytes))                \
  X(matmul_algo_get_heuristic, "cublasLtMatmulAlgoGetHeuristic", cublasStatus_t,                                 \
    (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,     \
     cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t preference, int requested,   \
     cublasLtMatmulHeuristicResult_t* results, int* returned))                                                   \
  X(matmul_algo_config_get_attribute, "cublasLtMatmulAlgoConfigGetAttribute", cublasStatus_t,                    \
    (const cublasLtMatmulAlgo_t* algo, int attribute, void* value, std::size_t bytes, std::size_t* written))     \
  X(matmul, "cublasLtMatmul", cublasStatus_t,                                                                    \
    (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,                      \
     cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout, const void* beta,         \
     const void* c, cublasLtMatrixLayout_t c_layout, void* d, cublasLtMatrixLayout_t d_layout,                  \
     const cublasLtMatmulAlgo_t* algo, void* workspace, std::size_t workspace_bytes, CUstream stream))

struct BlasLtTable {
#define FS_CUDA_DECLARE_MEMBER(member, symbol, ret, params) ret(*member) params = nullptr;
  FS_CUDA_BLASLT_CALLS(FS_CUDA_DECLARE_MEMBER)
#undef FS_CUDA_DECLARE_MEMBER
};

namespace blaslt_symbol {
#define FS_CUDA_DECLARE_SYMBOL(member, symbol, ret, params) inline constexpr const char* member = symbol;
FS_CUDA_BLASLT_CALLS(FS_CUDA_DECLARE_SYMBOL)
#undef FS_CUDA_DECLARE_SYMBOL
}  // namespace blaslt_symbol

// Opens `library` and resolves every call; throws fs::Error naming the library or the missing symbol.
BlasLtTable load_blaslt_table(const std::string& library = "libcublasLt.so.13");

// The current table: the installed one, else libcublasLt.so.13 loaded once on first use.
const BlasLtTable& blaslt();

// Throws fs::Error "<call> failed: CUBLAS_STATUS_... (n): text" unless status is success.
void check_blas(cublasStatus_t status, const char* call, const std::string& what = {});

class ScopedBlasLtTable {
 public:
  explicit ScopedBlasLtTable(const BlasLtTable& table);
  ~ScopedBlasLtTable();
  ScopedBlasLtTable(const ScopedBlasLtTable&) = delete;
  ScopedBlasLtTable& operator=(const ScopedBlasLtTable&) = delete;

 private:
  const BlasLtTable* previous_;
};

}  // namespace fs::cuda

// Calls blaslt().member(args...) and throws fs::Error naming the exported symbol when it fails.
#define FS_BLAS(member, ...) \
  ::fs::cuda::check_blas(::fs::cuda::blaslt().member(__VA_ARGS__), ::fs::cuda::blaslt_symbol::member)

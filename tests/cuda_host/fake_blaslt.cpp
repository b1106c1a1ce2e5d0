// Fake cuBLASLt: object bookkeeping, call record, failure injection and a host column-major matmul.
#include "fake_blaslt.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace fs::cuda::test {

namespace {

FakeBlasLt* active_fake = nullptr;

FakeBlasLt& active() {
  if (!active_fake) throw std::logic_error("fake cuBLASLt called with no FakeBlasLt alive");
  return *active_fake;
}

// Element (row, col) of a column-major bf16 matrix.
float element(const void* data, const FakeBlasLt::Layout& layout, std::uint64_t row, std::uint64_t col) {
  std::uint16_t bits;
  std::memcpy(&bits, static_cast<const unsigned char*>(data) + 2 * (row + col * layout.ld), 2);
  return from_bf16(bits);
}

BlasLtTable make_table() {
  using Fake = FakeBlasLt;
  BlasLtTable t;
  t.create = [](cublasLtHandle_t* handle) {
    if (cublasStatus_t s = active().enter(blaslt_symbol::create)) return s;
    *handle = static_cast<cublasLtHandle_t>(active().make("handle"));
    return CUBLAS_STATUS_SUCCESS;
  };
  t.destroy = [](cublasLtHandle_t handle) {
    if (cublasStatus_t s = active().enter(blaslt_symbol::destroy)) return s;
    return active().destroy(handle, "handle");
  };
  t.get_status_name = [](cublasStatus_t status) -> const char* {
    switch (status) {
      case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
      case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
      case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
      default: return "CUBLAS_STATUS_UNKNOWN";
    }
  };
  t.get_status_string = [](cublasStatus_t status) -> const char* {
    switch (status) {
      case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
      case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
      case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
      default: return "unknown error";
    }
  };
  t.matmul_desc_create = [](cublasLtMatmulDesc_t* desc, int compute, int scale) {
    if (cublasStatus_t s = active().enter(blaslt_symbol::matmul_desc_create)) return s;
    *desc = static_cast<cublasLtMatmulDesc_t>(active().make("desc"));
    active().descs[*desc] = {};
    return CUBLAS_STATUS_SUCCESS;
  };
  t.matmul_desc_destroy = [](cublasLtMatmulDesc_t desc) {
    if (cublasStatus_t s = active().enter(blaslt_symbol::matmul_desc_destroy)) return s;
    active().descs.erase(desc);
    return active().destroy(desc, "desc");
  };
  t.matmul_desc_set_attribute = [](cublasLtMatmulDesc_t desc, int attribute, const void* value, std::size_t bytes) {
    if (cublasStatus_t s = active().enter(blaslt_symbol::matmul_desc_set_attribute)) return s;
    auto it = active().descs.find(desc);
    if (it == active().descs.end() || bytes != sizeof(std::int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
    std::int32_t op;
    std::memcpy(&op, value, sizeof(op));
    if (attribute == CUBLASLT_MATMUL_DESC_TRANSA) it->second.transa = op;
    if (attribute == CUBLASLT_MATMUL_DESC_TRANSB) it->second.transb = op;
    return CUBLAS_STATUS_SUCCESS;
  };
  t.matrix_layout_create = [](cublasLtMatrixLayout_t* layout, int type, std::uint64_t rows, std::uint64_t cols,
                              std::int64_t ld) {
    if (cublasStatus_t s = active().enter(blaslt_symbol::matrix_layout_create)) return s;
    if (ld < static_cast<std::int64_t>(rows)) return CUBLAS_STATUS_INVALID_VALUE;
    *layout = static_cast<cublasLtMatrixLayout_t>(active().make("layout"));
    active().layouts[*layout] = {type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
  };
  t.matrix_layout_destroy = [](cublasLtMatrixLayout_t layout) {
    if (cublasStatus_t s = active().enter(blaslt_symbol::matrix_layout_destroy)) return s;
    active().layouts.erase(layout);
    return active().destroy(layout, "layout");
  };
  t.matmul_preference_create = [](cublasLtMatmulPreference_t* preference) {
    if (cublasStatus_t s = active().enter(blaslt_symbol::matmul_preference_create)) return s;
    *preference = static_cast<cublasLtMatmulPreference_t>(active().make("preference"));
    return CUBLAS_STATUS_SUCCESS;
  };
  t.matmul_preference_destroy = [](cublasLtMatmulPreference_t preference) {
    if (cublasStatus_t s = active().enter(blaslt_symbol::matmul_preference_destroy)) return s;
    return active().destroy(preference, "preference");
  };
  t.matmul_preference_set_attribute = [](cublasLtMatmulPreference_t preference, int, const void*, std::size_t) {
    if (cublasStatus_t s = active().enter(blaslt_symbol::matmul_preference_set_attribute)) return s;
    return active().alive(preference, "preference") ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  };
  t.matmul_algo_get_heuristic = [](cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t,
                                   cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                   cublasLtMatmulPreference_t preference, int requested,
                                   cublasLtMatmulHeuristicResult_t* results, int* returned) {
    if (cublasStatus_t s = active().enter(blaslt_symbol::matmul_algo_get_heuristic)) return s;
    Fake& f = active();
    if (!f.alive(handle, "handle") || !f.alive(desc, "desc") || !f.alive(preference, "preference")) {
      return CUBLAS_STATUS_INVALID_VALUE;
    }
    *returned = std::min(requested, f.algorithms_found_);
    for (int i = 0; i < *returned; ++i) {
      results[i] = {};
      results[i].algo.data[0] = 42 + static_cast<std::uint64_t>(i);
      results[i].workspaceSize = 1024;
    }
    return CUBLAS_STATUS_SUCCESS;
  };
  t.matmul = [](cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout, const void* beta,
                const void*, cublasLtMatrixLayout_t, void* d, cublasLtMatrixLayout_t d_layout,
                const cublasLtMatmulAlgo_t* algo, void*, std::size_t, CUstream) {
    if (cublasStatus_t s = active().enter(blaslt_symbol::matmul)) return s;
    Fake& f = active();
    if (!f.alive(handle, "handle") || !f.descs.count(desc) || !f.layouts.count(a_layout) ||
        !f.layouts.count(b_layout) || !f.layouts.count(d_layout) || !algo || algo->data[0] < 42) {
      return CUBLAS_STATUS_INVALID_VALUE;
    }
    const Fake::Desc& op = f.descs[desc];
    const Fake::Layout& la = f.layouts[a_layout];
    const Fake::Layout& lb = f.layouts[b_layout];
    const Fake::Layout& ld = f.layouts[d_layout];
    std::uint64_t a_rows = op.transa == CUBLAS_OP_T ? la.cols : la.rows;
    std::uint64_t inner = op.transa == CUBLAS_OP_T ? la.rows : la.cols;
    std::uint64_t b_rows = op.transb == CUBLAS_OP_T ? lb.cols : lb.rows;
    std::uint64_t b_cols = op.transb == CUBLAS_OP_T ? lb.rows : lb.cols;
    if (a_rows != ld.rows || b_cols != ld.cols || inner != b_rows) return CUBLAS_STATUS_INVALID_VALUE;
    float scale = *static_cast<const float*>(alpha), keep = *static_cast<const float*>(beta);
    if (keep != 0.0f) return CUBLAS_STATUS_NOT_SUPPORTED;
    for (std::uint64_t i = 0; i < ld.rows; ++i) {
      for (std::uint64_t j = 0; j < ld.cols; ++j) {
        float sum = 0.0f;
        for (std::uint64_t p = 0; p < inner; ++p) {
          float av = op.transa == CUBLAS_OP_T ? element(a, la, p, i) : element(a, la, i, p);
          float bv = op.transb == CUBLAS_OP_T ? element(b, lb, j, p) : element(b, lb, p, j);
          sum += av * bv;
        }
        std::uint16_t bits = to_bf16(scale * sum);
        std::memcpy(static_cast<unsigned char*>(d) + 2 * (i + j * ld.ld), &bits, 2);
      }
    }
    return CUBLAS_STATUS_SUCCESS;
  };
  return t;
}

}  // namespace

FakeBlasLt::FakeBlasLt() {
  if (active_fake) throw std::logic_error("only one FakeBlasLt may be alive at a time");
  active_fake = this;
  table_ = make_table();
  installed_ = std::make_unique<ScopedBlasLtTable>(table_);
}

FakeBlasLt::~FakeBlasLt() {
  installed_.reset();
  active_fake = nullptr;
}

void FakeBlasLt::fail_call(const std::string& name, int nth, cublasStatus_t status) {
  failures_.push_back({name, nth, status});
}

cublasStatus_t FakeBlasLt::enter(const char* name) {
  calls_.push_back(name);
  for (auto it = failures_.begin(); it != failures_.end(); ++it) {
    if (it->name == name && --it->remaining == 0) {
      cublasStatus_t status = it->status;
      failures_.erase(it);
      return status;
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

std::size_t FakeBlasLt::count(std::string_view name) const {
  return std::count(calls_.begin(), calls_.end(), name);
}

void* FakeBlasLt::make(const std::string& kind) {
  void* object = reinterpret_cast<void*>(next_object_++);
  live_[object] = kind;
  return object;
}

cublasStatus_t FakeBlasLt::destroy(void* object, const std::string& kind) {
  auto it = live_.find(object);
  if (it == live_.end() || it->second != kind) return CUBLAS_STATUS_INVALID_VALUE;
  live_.erase(it);
  return CUBLAS_STATUS_SUCCESS;
}

bool FakeBlasLt::alive(const void* object, const std::string& kind) const {
  auto it = live_.find(object);
  return it != live_.end() && it->second == kind;
}

std::uint16_t to_bf16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>(bits >> 16);
}

float from_bf16(std::uint16_t bits) {
  std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

}  // namespace fs::cuda::test

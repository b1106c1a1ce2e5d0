#pragma once
// A fake cuBLASLt for host tests: tracks every handle, descriptor, layout and preference it hands out, records
// calls, can fail the Nth call of a name, and runs cublasLtMatmul on host memory with the documented column-major
// semantics (D = op(A)·op(B)) so the row-major mapping of the callers is checked.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/host/blaslt_table.h"

namespace fs::cuda::test {

class FakeBlasLt {
 public:
  FakeBlasLt();
  ~FakeBlasLt();
  FakeBlasLt(const FakeBlasLt&) = delete;
  FakeBlasLt& operator=(const FakeBlasLt&) = delete;

  // The `nth` (1-based) later call of `name` returns `status` and does nothing.
  void fail_call(const std::string& name, int nth, cublasStatus_t status = CUBLAS_STATUS_EXECUTION_FAILED);
  // How many algorithms the heuristic reports (0: none for any shape).
  void set_algorithms_found(int count) { algorithms_found_ = count; }

  std::size_t count(std::string_view name) const;
  // Handles, descriptors, layouts and preferences created and not yet destroyed.
  std::size_t live_objects() const { return live_.size(); }
  const BlasLtTable& table() const { return table_; }

  // Entry points (called through the table).
  // Records a call of `name`; returns the injected failure for it, or success.
  cublasStatus_t enter(const char* name);
  void* make(const std::string& kind);
  cublasStatus_t destroy(void* object, const std::string& kind);
  bool alive(const void* object, const std::string& kind) const;

  struct Layout {
    int type;
    std::uint64_t rows, cols;
    std::int64_t ld;
  };
  struct Desc {
    int transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  };
  std::map<const void*, Layout> layouts;
  std::map<const void*, Desc> descs;
  int algorithms_found_ = 1;

 private:
  struct Failure {
    std::string name;
    int remaining;
    cublasStatus_t status;
  };

  BlasLtTable table_;
  std::unique_ptr<ScopedBlasLtTable> installed_;
  std::vector<std::string> calls_;
  std::vector<Failure> failures_;
  std::map<const void*, std::string> live_;
  std::uintptr_t next_object_ = 0x5000;
};

// bf16 <-> float helpers for tests (round to nearest even).
std::uint16_t to_bf16(float value);
float from_bf16(std::uint16_t bits);

}  // namespace fs::cuda::test

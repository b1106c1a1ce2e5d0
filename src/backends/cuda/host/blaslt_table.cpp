// Loads the cuBLASLt table with dlopen and keeps the process-wide current table.
#include "backends/cuda/host/blaslt_table.h"

#include <atomic>

#include "backends/cuda/host/dl_library.h"
#include "core/error.h"

namespace fs::cuda {

namespace {

std::atomic<const BlasLtTable*> installed_table{nullptr};

}  // namespace

BlasLtTable load_blaslt_table(const std::string& library) {
  void* handle = open_library(library, "cuBLASLt", "GEMMs on the GPU need the CUDA 13 cuBLAS runtime");
  BlasLtTable table;
#define FS_CUDA_RESOLVE(member, symbol, ret, params)                  \
  table.member = reinterpret_cast<ret(*) params>(                \
      resolve_symbol(handle, library, symbol, "cuBLASLt", ""));
  FS_CUDA_BLASLT_CALLS(FS_CUDA_RESOLVE)
#undef FS_CUDA_RESOLVE
  return table;
}

const BlasLtTable& blaslt() {
  if (const BlasLtTable* table = installed_table.load(std::memory_order_acquire)) return *table;
  static const BlasLtTable real = load_blaslt_table();
  return real;
}

void check_blas(cublasStatus_t status, const char* call, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const BlasLtTable& table = blaslt();
  const char* name = table.get_status_name ? table.get_status_name(status) : nullptr;
  const char* text = table.get_status_string ? table.get_status_string(status) : nullptr;
  std::string message = std::string(call) + " failed";
  if (!what.empty()) message += " for " + what;
  throw Error(message + ": " + (name ? name : "cuBLAS status") + " (" + std::to_string(status) +
              "): " + (text ? text : "unrecognized status"));
}

ScopedBlasLtTable::ScopedBlasLtTable(const BlasLtTable& table)
    : previous_(installed_table.exchange(&table, std::memory_order_acq_rel)) {}

ScopedBlasLtTable::~ScopedBlasLtTable() { installed_table.store(previous_, std::memory_order_release); }

}  // namespace fs::cuda

// Loads the NCCL table with dlopen and keeps the process-wide current table.
#include "backends/cuda/host/nccl_table.h"

#include <atomic>

#include "backends/cuda/host/dl_library.h"
#include "core/error.h"

namespace fs::cuda {

namespace {

std::atomic<const NcclTable*> installed_table{nullptr};

}  // namespace

NcclTable load_nccl_table(const std::string& library) {
  void* handle = open_library(library, "NCCL", "tensor parallelism needs NCCL 2 (libnccl.so.2)");
  NcclTable table;
#define FS_CUDA_RESOLVE(member, symbol, ret, params) \
  table.member = reinterpret_cast<ret(*) params>(resolve_symbol(handle, library, symbol, "NCCL", ""));
  FS_CUDA_NCCL_CALLS(FS_CUDA_RESOLVE)
#undef FS_CUDA_RESOLVE
  return table;
}

const NcclTable& nccl() {
  if (const NcclTable* table = installed_table.load(std::memory_order_acquire)) return *table;
  static const NcclTable real = load_nccl_table();
  return real;
}

std::string nccl_version_text(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

std::string nccl_description() {
  try {
    int code = 0;
    check_nccl(nccl().get_version(&code), nccl_symbol::get_version);
    return nccl_version_text(code);
  } catch (const Error& e) {
    return std::string("not available (") + e.what() + ")";
  }
}

void check_nccl(ncclResult_t result, const char* call, const std::string& what) {
  if (result == ncclSuccess) return;
  const NcclTable& table = nccl();
  const char* text = table.get_error_string ? table.get_error_string(result) : nullptr;
  std::string message = std::string(call) + " failed";
  if (!what.empty()) message += " for " + what;
  throw Error(message + ": " + (text ? text : "unrecognized NCCL result") + " (" + std::to_string(result) + ")");
}

ScopedNcclTable::ScopedNcclTable(const NcclTable& table)
    : previous_(installed_table.exchange(&table, std::memory_order_acq_rel)) {}

ScopedNcclTable::~ScopedNcclTable() { installed_table.store(previous_, std::memory_order_release); }

}  // namespace fs::cuda

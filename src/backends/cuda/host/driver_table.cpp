// Loads the driver table from libcuda with dlopen and keeps the process-wide current table.
#include "backends/cuda/host/driver_table.h"

#include <atomic>

#include "backends/cuda/host/dl_library.h"
#include "core/error.h"

namespace fs::cuda {

namespace {

std::atomic<const DriverTable*> installed_table{nullptr};

}  // namespace

DriverTable load_driver_table(const std::string& library) {
  void* handle = open_library(library, "CUDA driver", "the CUDA backend needs an NVIDIA driver");
  DriverTable table;
#define FS_CUDA_RESOLVE(member, symbol, ret, params)                  \
  table.member = reinterpret_cast<ret(*) params>(                \
      resolve_symbol(handle, library, symbol, "CUDA driver", "; the driver is too old or this is not libcuda"));
  FS_CUDA_DRIVER_CALLS(FS_CUDA_RESOLVE)
#undef FS_CUDA_RESOLVE
  return table;
}

const DriverTable& driver() {
  if (const DriverTable* table = installed_table.load(std::memory_order_acquire)) return *table;
  static const DriverTable real = load_driver_table();
  return real;
}

ScopedDriverTable::ScopedDriverTable(const DriverTable& table)
    : previous_(installed_table.exchange(&table, std::memory_order_acq_rel)) {}

ScopedDriverTable::~ScopedDriverTable() { installed_table.store(previous_, std::memory_order_release); }

}  // namespace fs::cuda

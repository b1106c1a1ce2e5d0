// Loads the driver table from libcuda with dlopen and keeps the process-wide current table.
#include "backends/cuda/host/driver_table.h"

#include <dlfcn.h>

#include <atomic>

#include "core/error.h"

namespace fs::cuda {

namespace {

std::atomic<const DriverTable*> installed_table{nullptr};

std::string last_dl_error() {
  const char* text = dlerror();
  return text ? text : "unknown dlopen error";
}

}  // namespace

DriverTable load_driver_table(const std::string& library) {
  dlerror();
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    throw Error("CUDA driver library " + library + " could not be loaded (" + last_dl_error() +
                "); the CUDA backend needs an NVIDIA driver");
  }
  DriverTable table;
#define FS_CUDA_RESOLVE(member, symbol, ret, params)                                                    \
  dlerror();                                                                                             \
  table.member = reinterpret_cast<ret(*) params>(dlsym(handle, symbol));                                 \
  if (!table.member) {                                                                                   \
    std::string reason = last_dl_error();                                                                \
    dlclose(handle);                                                                                     \
    throw Error("CUDA driver library " + library + " lacks " + symbol + " (" + reason +                  \
                "); the driver is too old or this is not libcuda");                                      \
  }
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

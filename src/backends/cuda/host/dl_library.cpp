#include "backends/cuda/host/dl_library.h"

#include <dlfcn.h>

#include "core/error.h"

namespace fs::cuda {

static std::string last_dl_error() {
  const char* text = dlerror();
  return text ? text : "unknown dlopen error";
}

void* open_library(const std::string& library, const std::string& what, const std::string& hint) {
  dlerror();
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw Error(what + " library " + library + " could not be loaded (" + last_dl_error() + "); " + hint);
  return handle;
}

void* resolve_symbol(void* handle, const std::string& library, const char* symbol, const std::string& what,
                     const std::string& suffix) {
  dlerror();
  void* address = dlsym(handle, symbol);
  if (!address) {
    std::string reason = last_dl_error();
    dlclose(handle);
    throw Error(what + " library " + library + " lacks " + symbol + " (" + reason + ")" + suffix);
  }
  return address;
}

}  // namespace fs::cuda

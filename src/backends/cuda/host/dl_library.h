#pragma once
// dlopen/dlsym with errors that name the library, for the driver and cuBLASLt tables.
#include <string>

namespace fs::cuda {

// Opens `library` or throws "<what> library <library> could not be loaded (<dlerror>); <hint>".
void* open_library(const std::string& library, const std::string& what, const std::string& hint);
// The address of `symbol`; else closes `handle` and throws "<what> library <library> lacks <symbol> (<dlerror>)"
// followed by `suffix`.
void* resolve_symbol(void* handle, const std::string& library, const char* symbol, const std::string& what,
                     const std::string& suffix);

}  // namespace fs::cuda

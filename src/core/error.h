#pragma once
// One exception type for every user-facing failure: a clear message naming the file or field at fault.
#include <stdexcept>
#include <string>

namespace fs {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace fs

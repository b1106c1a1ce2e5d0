#pragma once
// The message of the fs::Error an action throws.
#include <functional>
#include <string>

#include "core/error.h"

namespace fs::cuda::test {

// What `action` throws as an fs::Error, or an empty string when it throws nothing.
inline std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace fs::cuda::test

#pragma once
// Switches set from the environment: on unless the variable is "0".
#include <cstdlib>
#include <string_view>

namespace fs::cuda {

// Whether the switch `variable` (FOLDSERVE_CUDA_GRAPHS, FOLDSERVE_CUDA_OVERLAP, …) is on: any value but "0".
inline bool switched_on(const char* variable) {
  const char* v = std::getenv(variable);
  return !(v && std::string_view(v) == "0");
}

}  // namespace fs::cuda

// Driver error reporting.
#include "backends/cuda/host/check.h"

#include "core/error.h"

namespace fs::cuda {

std::string describe_result(CUresult result) {
  const DriverTable& table = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  if (!table.get_error_name || table.get_error_name(result, &name) != CUDA_SUCCESS || !name) name = "CUDA error";
  if (!table.get_error_string || table.get_error_string(result, &text) != CUDA_SUCCESS || !text) {
    text = "unrecognized error code";
  }
  return std::string(name) + " (" + std::to_string(result) + "): " + text;
}

void check(CUresult result, const char* call, const std::string& what) {
  if (result == CUDA_SUCCESS) return;
  std::string message = std::string(call) + " failed";
  if (!what.empty()) message += " for " + what;
  throw Error(message + ": " + describe_result(result));
}

}  // namespace fs::cuda

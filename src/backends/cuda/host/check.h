#pragma once
// Turns a CUresult into fs::Error naming the driver call and the driver's own error text.
#include <string>

#include "backends/cuda/host/driver_table.h"

namespace fs::cuda {

// "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", asking the current driver table for the name and text.
std::string describe_result(CUresult result);

// Throws fs::Error "<call> failed: <describe_result>" (with "for <what>" when given) unless result is success.
void check(CUresult result, const char* call, const std::string& what = {});

}  // namespace fs::cuda

// Calls driver().member(args...) and throws fs::Error naming the exported symbol when it fails.
#define FS_CU(member, ...) \
  ::fs::cuda::check(::fs::cuda::driver().member(__VA_ARGS__), ::fs::cuda::driver_symbol::member)

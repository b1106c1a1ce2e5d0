#pragma once
// A loaded code image (cubin, fatbin or PTX) and kernel launches through the driver table.
#include <string>
#include <string_view>

#include "backends/cuda/host/driver_types.h"

namespace fs::cuda {

// Grid and block sizes of one launch.
struct LaunchShape {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  unsigned shared_bytes = 0;
  // Programmatic dependent launch: the kernel may start while the stream's previous kernel finishes, and must wait
  // for it (griddepcontrol.wait) before it reads or writes anything an earlier kernel touches.
  bool overlaps_previous = false;
};

class Module {
 public:
  // Loads `image` (kept alive by the caller only for this call); `name` labels errors.
  Module(const void* image, std::string name);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Looks a kernel up by its (mangled or extern "C") name; throws fs::Error naming module and kernel.
  CUfunction function(const std::string& kernel) const;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  CUmodule handle_ = nullptr;
};

// Queues `fn` on `stream` with `params` (one pointer per kernel argument); `what` names the kernel in errors.
void launch(CUfunction fn, const LaunchShape& shape, CUstream stream, void** params, std::string_view what);

// The same for CUDA translation units, where cuda_runtime.h declares its own CUfunc_st and CUstream_st: `fn` is a
// CUfunction and `stream` a CUstream passed as void*.
void launch_opaque(void* fn, const LaunchShape& shape, void* stream, void** params, std::string_view what);
// Sets one attribute of the CUfunction `fn` (cuFuncSetAttribute); `what` names the kernel in errors.
void set_function_attribute(void* fn, CUfunction_attribute attribute, int value, std::string_view what);

}  // namespace fs::cuda

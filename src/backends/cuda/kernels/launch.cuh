#pragma once
// Kernel launches through the driver table: a kernel's handle is the runtime's registration of this library's code
// (cudaGetFuncBySymbol); setting its attributes and launching it go through cuda::driver() like every other driver
// call, so failures are reported the same way and a fake table sees them.
#include <cuda_runtime.h>

#include <mutex>
#include <string>
#include <unordered_set>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backends/cuda/host/module.h"
#include "backends/cuda/kernels/grid_stride.h"
#include "core/error.h"

namespace fs::cuda::kernels {

// The driver handle (a CUfunction) of a kernel compiled into this library; throws fs::Error naming `what`.
inline void* kernel_function(const void* kernel, const char* what) {
  cudaFunction_t fn = nullptr;
  const cudaError_t e = cudaGetFuncBySymbol(&fn, kernel);
  if (e != cudaSuccess || !fn) {
    cudaGetLastError();
    throw Error(std::string("CUDA kernel ") + what + " has no driver handle: " + cudaGetErrorString(e));
  }
  return static_cast<void*>(fn);
}

// The current device's multiprocessor count; throws fs::Error naming `what` when it cannot be read.
inline int multiprocessor_count(const char* what) {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    throw Error(std::string(what) + " could not read the device's multiprocessor count");
  }
  return count;
}

// Lets `kernel` take `bytes` of dynamic shared memory; `prefer_shared` also asks for the largest shared carveout.
template <typename... Params>
void allow_shared_memory(void (*kernel)(Params...), unsigned bytes, const char* what, bool prefer_shared = false) {
  void* fn = kernel_function(reinterpret_cast<const void*>(kernel), what);
  set_function_attribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(bytes), what);
  if (prefer_shared) set_function_attribute(fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100, what);
}

// allow_shared_memory once per kernel and device: attributes belong to a context's handle of the kernel, so each
// device (each tensor-parallel rank) sets its own.
template <typename... Params>
void allow_shared_memory_once(void (*kernel)(Params...), unsigned bytes, const char* what, bool prefer_shared = false) {
  static std::mutex mutex;
  static std::unordered_set<void*> done;
  void* fn = kernel_function(reinterpret_cast<const void*>(kernel), what);
  std::lock_guard<std::mutex> lock(mutex);
  if (done.count(fn)) return;
  allow_shared_memory(kernel, bytes, what, prefer_shared);
  done.insert(fn);
}

// Queues kernel(args...) on `stream` with the given grid, block and dynamic shared memory; `overlaps`: with
// programmatic dependent launch (LaunchShape::overlaps_previous).
template <typename... Params, typename... Args>
void launch_kernel_as(const char* what, bool overlaps, void (*kernel)(Params...), dim3 grid, dim3 block,
                      unsigned shared_bytes, void* stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "one argument per kernel parameter");
  std::tuple<std::decay_t<Params>...> values(std::forward<Args>(args)...);
  std::apply(
      [&](auto&... v) {
        void* params[sizeof...(Params) + 1] = {static_cast<void*>(&v)..., nullptr};
        launch_opaque(kernel_function(reinterpret_cast<const void*>(kernel), what),
                      LaunchShape{grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, overlaps},
                      stream, params, what);
      },
      values);
}

// Queues kernel(args...) on `stream` (cuLaunchKernel).
template <typename... Params, typename... Args>
void launch_kernel(const char* what, void (*kernel)(Params...), dim3 grid, dim3 block, unsigned shared_bytes,
                   void* stream, Args&&... args) {
  launch_kernel_as(what, false, kernel, grid, block, shared_bytes, stream, std::forward<Args>(args)...);
}

// launch_kernel for a kernel that starts with wait_for_previous_grid(): it may be scheduled while the stream's
// previous kernel finishes (programmatic dependent launch, cuLaunchKernelEx).
template <typename... Params, typename... Args>
void launch_overlapping_kernel(const char* what, void (*kernel)(Params...), dim3 grid, dim3 block,
                               unsigned shared_bytes, void* stream, Args&&... args) {
  launch_kernel_as(what, true, kernel, grid, block, shared_bytes, stream, std::forward<Args>(args)...);
}

}  // namespace fs::cuda::kernels

#pragma once
// The emulated counterpart of src/backends/cuda/kernels/launch.cuh: launches run the grid on the host at once
// (tests/cuda_emulated/emulated_cuda.h); the device is an H100's 132 multiprocessors.
#include "backends/cuda/kernels/grid_stride.h"

namespace fs::cuda::kernels {

inline int multiprocessor_count(const char*) { return 132; }

template <typename Kernel>
void allow_shared_memory_once(Kernel, unsigned, const char*, bool = false) {}

template <typename Kernel, typename... Args>
void launch_kernel_as(const char* what, bool, Kernel kernel, dim3 grid, dim3 block, unsigned shared_bytes, void*,
                      Args&&... args) {
  emulated::launch(what, kernel, grid, block, shared_bytes, args...);
}
template <typename Kernel, typename... Args>
void launch_kernel(const char* what, Kernel kernel, dim3 grid, dim3 block, unsigned shared_bytes, void* stream,
                   Args&&... args) {
  launch_kernel_as(what, false, kernel, grid, block, shared_bytes, stream, std::forward<Args>(args)...);
}
template <typename Kernel, typename... Args>
void launch_overlapping_kernel(const char* what, Kernel kernel, dim3 grid, dim3 block, unsigned shared_bytes,
                               void* stream, Args&&... args) {
  launch_kernel_as(what, true, kernel, grid, block, shared_bytes, stream, std::forward<Args>(args)...);
}

}  // namespace fs::cuda::kernels

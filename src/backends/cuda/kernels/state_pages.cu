// A state slot's bytes copied into snapshot pages or back: one block a run of page_tokens K/V rows.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/state_page_ops.h"

namespace fs::cuda::kernels {

namespace {

constexpr int kCopyThreads = 256;

__global__ void __launch_bounds__(kCopyThreads)
    state_pages_kernel(unsigned char* state, size_t bytes, unsigned char* kv, size_t side_stride, int sides,
                       size_t run, const int32_t* pages, bool to_pages) {
  wait_for_previous_grid();
  const size_t j = blockIdx.x, offset = j * run, n = min(run, bytes - offset);
  unsigned char* page_run = kv + (j % size_t(sides)) * side_stride + size_t(pages[j / size_t(sides)]) * run;
  const unsigned char* src = to_pages ? state + offset : page_run;
  unsigned char* dst = to_pages ? page_run : state + offset;
  size_t done = 0;
  if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0) {
    done = n / 16 * 16;
    for (size_t i = threadIdx.x; i < n / 16; i += kCopyThreads)
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
  }
  for (size_t i = done + 4 * threadIdx.x; i < n; i += 4 * kCopyThreads)
    *reinterpret_cast<uint32_t*>(dst + i) = *reinterpret_cast<const uint32_t*>(src + i);
}

}  // namespace

void copy_state_pages(float* state, size_t bytes, void* kv, size_t side_stride, int sides, size_t run,
                      const int32_t* pages, bool to_pages, void* stream) {
  if (bytes == 0) return;
  const size_t runs = (bytes + run - 1) / run;
  launch_overlapping_kernel("copy_state_pages", state_pages_kernel, dim3(unsigned(runs)), dim3(kCopyThreads), 0,
                            stream, reinterpret_cast<unsigned char*>(state), bytes, static_cast<unsigned char*>(kv),
                            side_stride, sides, run, pages, to_pages);
}

}  // namespace fs::cuda::kernels

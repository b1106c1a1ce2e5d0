#pragma once
// Host entry point of the copies of a recurrent state into prompt-cache snapshot pages and back (ops.h's
// conventions).
#include <cstddef>
#include <cstdint>

namespace fs::cuda::kernels {

// `bytes` of `state` (a multiple of 4) laid over K/V runs in order (`to_pages`), or gathered back from them: run j
// (`run` bytes, the last one shorter) is kv + (j % sides)·side_stride + pages[j / sides]·run, i.e. each page's
// layers and sides in turn, as CudaModel's for_state_bytes walks them.
void copy_state_pages(float* state, size_t bytes, void* kv, size_t side_stride, int sides, size_t run,
                      const int32_t* pages, bool to_pages, void* stream);

}  // namespace fs::cuda::kernels

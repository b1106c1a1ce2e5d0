#pragma once
// Grid sizes for grid-stride loops (host arithmetic shared by the kernels' launches and their emulated tests).
#include <algorithm>
#include <cstddef>

namespace fs::cuda::kernels {

// Blocks of `threads` for a grid-stride loop over n elements: a thread an element, at most `most` blocks.
inline unsigned grid_stride_blocks(std::size_t n, int threads, std::size_t most) {
  return unsigned(std::min<std::size_t>((n + std::size_t(threads) - 1) / std::size_t(threads), most));
}

}  // namespace fs::cuda::kernels

#pragma once
// Image loops split by output rows over the calling thread's pool: each row is computed by one thread exactly as a
// single-thread loop would, so the pixels do not depend on the thread count.
#include <functional>

namespace fs::vision {

// Most parts one image loop is split into, whatever the pool's size.
inline constexpr int kMaxRowParts = 16;

// Runs body(begin, end) over contiguous ranges covering [0, rows), at most one range per thread of
// ThreadPool::global() (up to kMaxRowParts), none shorter than `min_rows` rows; one range on the calling thread
// when the pool has one thread.
void parallel_rows(int rows, int min_rows, const std::function<void(int, int)>& body);

}  // namespace fs::vision

#include "vision/parallel_rows.h"

#include <algorithm>

#include "core/thread_pool.h"

namespace fs::vision {

void parallel_rows(int rows, int min_rows, const std::function<void(int, int)>& body) {
  if (rows <= 0) return;
  ThreadPool& pool = ThreadPool::global();
  const int parts = std::clamp(rows / std::max(1, min_rows), 1, std::min(pool.size(), kMaxRowParts));
  if (parts == 1) return body(0, rows);
  pool.parallel_for(size_t(parts), [&](size_t first, size_t last) {
    for (size_t p = first; p < last; ++p)
      body(int(int64_t(rows) * int64_t(p) / parts), int(int64_t(rows) * int64_t(p + 1) / parts));
  });
}

}  // namespace fs::vision

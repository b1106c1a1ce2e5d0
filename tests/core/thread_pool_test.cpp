// The thread pool covers every index exactly once, from several callers at once.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace fs {
namespace {

TEST(ThreadPool, CoversEveryIndexOnce) {
  ThreadPool pool(3);
  for (size_t n : {0, 1, 2, 5, 1000}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) hits[i]++;
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, ConcurrentCallersAreSerializedSafely) {
  ThreadPool pool(2);
  std::atomic<long> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r)
        pool.parallel_for(100, [&](size_t b, size_t e) { total += long(e - b); });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4L * 50 * 100);
}

}  // namespace
}  // namespace fs

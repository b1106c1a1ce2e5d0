// The thread pool covers every index exactly once, from several callers at once, splits work the same way in every
// round, and its workers go to sleep once it is left idle.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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

// A float sum over each range, in index order: its bits depend on where the ranges start and end.
float range_sum(size_t begin, size_t end, int round) {
  float s = 0.0f;
  for (size_t i = begin; i < end; ++i) s += 1.0f / float(i + 1 + size_t(round));
  return s;
}

TEST(ThreadPool, ManyShortRoundsMatchTheSerialSplit) {
  ThreadPool pool(3);
  const int parts = pool.size();
  for (int round = 0; round < 3000; ++round) {
    const size_t n = size_t(2 + round % 37);
    std::vector<size_t> end_of(n, 0);  // by a range's first index
    std::vector<float> sum_of(n, 0.0f);
    pool.parallel_for(n, [&](size_t b, size_t e) {
      end_of[b] = e;
      sum_of[b] = range_sum(b, e, round);
    });
    size_t ranges = 0;
    for (int p = 0; p < parts; ++p) {
      const size_t b = n * size_t(p) / size_t(parts), e = n * size_t(p + 1) / size_t(parts);
      if (b == e) continue;
      ++ranges;
      ASSERT_EQ(end_of[b], e) << "round " << round << " part " << p;
      ASSERT_EQ(sum_of[b], range_sum(b, e, round)) << "round " << round << " part " << p;
    }
    ASSERT_EQ(size_t(std::count_if(end_of.begin(), end_of.end(), [](size_t e) { return e != 0; })), ranges);
  }
}

// Polls until every worker sleeps on the condition variable; fails only if the spinning never ends.
bool all_workers_park(const ThreadPool& pool) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (pool.parked_workers() != pool.size() - 1) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(ThreadPool, IdleWorkersParkAndWakeForTheNextCall) {
  ThreadPool pool(3);
  EXPECT_TRUE(all_workers_park(pool));
  for (int round = 0; round < 3; ++round) {
    std::vector<std::atomic<int>> hits(100);
    pool.parallel_for(hits.size(), [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) hits[i]++;
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    EXPECT_TRUE(all_workers_park(pool)) << "round " << round;
  }
}

TEST(ThreadPool, CallerWaitsForARangeLongerThanTheSpin) {
  ThreadPool pool(2);
  std::atomic<int> done{0};
  pool.parallel_for(2, [&](size_t b, size_t) {
    if (b == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    done++;
  });
  EXPECT_EQ(done.load(), 2);
}

}  // namespace
}  // namespace fs

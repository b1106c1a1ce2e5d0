// Rank workers: a job runs once on every rank, each on its own thread and all at once, and a failing rank's error
// comes back naming it after every rank has finished.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "backends/cuda/host/rank_workers.h"
#include "core/error.h"

namespace fs::cuda {
namespace {

TEST(RankWorkers, EveryRankRunsOnItsOwnThreadAtTheSameTime) {
  RankWorkers workers(3);
  std::mutex m;
  std::set<std::thread::id> threads;
  std::atomic<int> arrived{0};
  for (int round = 0; round < 5; ++round) {
    arrived = 0;
    std::vector<int> ran(3, 0);
    workers.run([&](int r) {
      ++arrived;
      while (arrived < 3) std::this_thread::yield();  // a rank that waits for its peers, as in a collective
      ++ran[size_t(r)];
      std::lock_guard<std::mutex> lock(m);
      threads.insert(std::this_thread::get_id());
    });
    EXPECT_EQ(ran, std::vector<int>({1, 1, 1}));
  }
  EXPECT_EQ(threads.size(), 3u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
}

TEST(RankWorkers, AFailingRankIsNamedAfterAllRanksFinish) {
  RankWorkers workers(2);
  std::atomic<int> finished{0};
  try {
    workers.run([&](int r) {
      ++finished;
      if (r == 1) throw Error("out of memory");
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor-parallel rank 1 of 2: out of memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(finished, 2);
  int after = 0;
  workers.run([&](int) { ++after; });  // the workers go on after a failure
  EXPECT_EQ(after, 2);
}

TEST(RankWorkers, ARankThatStoppedForAPeerIsNotTheOneReported) {
  RankWorkers workers(3);
  try {
    workers.run([&](int r) {
      if (r == 0) throw RankStopped("rank 0 of 3 stopped: rank 2 of 3 failed");
      if (r == 2) throw Error("out of memory");
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "tensor-parallel rank 2 of 3: out of memory");
  }
}

// The watch runs on the caller's thread with the ranks still running, and can release a stuck rank.
TEST(RankWorkers, AWatchSeesTheRanksStillRunningAndCanReleaseThem) {
  RankWorkers workers(3);
  std::atomic<bool> released{false};
  std::vector<std::vector<int>> seen;
  workers.run(
      [&](int r) {
        if (r == 1)
          while (!released) std::this_thread::yield();
      },
      std::chrono::milliseconds(1), [&](const std::vector<int>& unfinished) {
        seen.push_back(unfinished);
        if (unfinished == std::vector<int>{1}) released = true;
      });
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), std::vector<int>{1});
  for (const auto& ranks : seen) EXPECT_NE(std::find(ranks.begin(), ranks.end(), 1), ranks.end());
}

}  // namespace
}  // namespace fs::cuda

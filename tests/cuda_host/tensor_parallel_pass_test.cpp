// A failing rank fails the pass cleanly on the fake NCCL: the failing rank's error comes back naming it after every
// rank has returned, peers stop instead of waiting for calls that never come, a failure that leaves the ranks in
// step lets the next pass run, and one that does not (an NCCL error, ranks that issued different collectives) aborts
// the communicators at once and refuses every later pass by name.
#include "backends/cuda/host/tensor_parallel_pass.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/host/rank_sum_order.h"
#include "backends/cuda/host/round_collectives.h"
#include "error_message.h"
#include "fake_nccl.h"
#include "host_round.h"

namespace fs::cuda {
namespace {

using test::FakeNccl;
using test::host_rank_sum;
using test::message_of;

constexpr RoundShape kShape{1, 4, 2, 1, 3};  // 1 layer, hidden 4, 2 rows, 1 logit row, 3 vocabulary rows per rank

std::vector<float> run_round(const TensorParallelGroup& group, int rank) {
  return test::run_host_round(group, rank, kShape);
}

size_t collectives(const FakeNccl& fake, int rank) {
  size_t n = 0;
  for (const auto& call : fake.calls(rank)) n += call.rfind("ncclAllGather", 0) == 0;
  return n;
}

// A whole pass of every rank succeeds and sums the ranks' partials.
void expect_pass_runs(RankWorkers& workers, TensorParallelGroup& group) {
  std::vector<std::vector<float>> sums(size_t(group.ranks()));
  run_tensor_parallel(workers, group, [&](int r) { sums[size_t(r)] = run_round(group, r); });
  const float expected = float(group.ranks() * (group.ranks() + 1) / 2);
  for (const auto& sum : sums) EXPECT_EQ(sum, std::vector<float>(8, expected));
}

TEST(TensorParallelPass, ARankFailingBeforeItsRoundStopsItsPeersAndTheNextPassRuns) {
  FakeNccl fake;
  TensorParallelGroup group({0, 1, 2}, host_rank_sum());
  RankWorkers workers(3);
  const std::string message = message_of([&] {
    run_tensor_parallel(workers, group, [&](int r) {
      if (r == 1) throw Error("out of memory for the round's scratch");
      run_round(group, r);
    });
  });
  EXPECT_EQ(message, "tensor-parallel rank 1 of 3: out of memory for the round's scratch");
  for (int r = 0; r < 3; ++r) EXPECT_EQ(collectives(fake, r), 0u) << "rank " << r;
  EXPECT_TRUE(group.in_step());
  EXPECT_FALSE(group.aborted());
  expect_pass_runs(workers, group);
}

TEST(TensorParallelPass, ARankFailingAfterTheRoundsCollectivesIsTransient) {
  FakeNccl fake;
  TensorParallelGroup group({0, 1}, host_rank_sum());
  RankWorkers workers(2);
  const std::string message = message_of([&] {
    run_tensor_parallel(workers, group, [&](int r) {
      run_round(group, r);
      if (r == 0) throw Error("downloading the logits failed");
    });
  });
  EXPECT_EQ(message, "tensor-parallel rank 0 of 2: downloading the logits failed");
  EXPECT_FALSE(group.aborted());
  expect_pass_runs(workers, group);
}

TEST(TensorParallelPass, AnNcclErrorAbortsTheGroupAndLaterPassesAreRefused) {
  FakeNccl fake;
  {
    TensorParallelGroup group({0, 1}, host_rank_sum());
    RankWorkers workers(2);
    fake.fail_next_collective(1);
    const std::string message = message_of([&] { expect_pass_runs(workers, group); });
    const std::string first = "tensor-parallel rank 1 of 2: ncclAllGather failed for rank 1 of 2: unhandled cuda error (1)";
    EXPECT_EQ(message, first);
    EXPECT_TRUE(group.aborted());
    for (int r = 0; r < 2; ++r) EXPECT_EQ(fake.calls(r).back(), "ncclCommAbort") << "rank " << r;
    EXPECT_EQ(fake.live_comms(), 0u);

    std::atomic<int> ran{0};
    EXPECT_EQ(message_of([&] { run_tensor_parallel(workers, group, [&](int) { ++ran; }); }),
              "the tensor-parallel group was stopped after a failure (" + first +
                  "); restart foldserve to run on it again");
    EXPECT_EQ(ran, 0);
    std::vector<float> buffer(4), gathered(8);
    const size_t issued = collectives(fake, 0);
    EXPECT_EQ(message_of([&] { group.all_reduce(0, buffer.data(), gathered.data(), 4, nullptr); }),
              "rank 0 of 2: the tensor-parallel group was stopped after a failure (" + first + ")");
    EXPECT_EQ(collectives(fake, 0), issued);
  }
  for (int r = 0; r < 2; ++r) {
    const auto calls = fake.calls(r);
    EXPECT_EQ(std::count(calls.begin(), calls.end(), "ncclCommAbort"), 1) << "rank " << r;
    EXPECT_EQ(std::count(calls.begin(), calls.end(), "ncclCommDestroy"), 0) << "rank " << r;
  }
}

// Rank 0 is inside its second collective (on a GPU it would wait there for rank 1) when rank 1 fails after its
// first: the ranks are out of step, so the group is aborted, releasing rank 0, and the error is rank 1's.
TEST(TensorParallelPass, ARankFailingMidRoundAbortsTheGroupInsteadOfLeavingItsPeerWaiting) {
  FakeNccl fake;
  fake.set_peer_wait(std::chrono::milliseconds(200));
  TensorParallelGroup group({0, 1}, host_rank_sum());
  RankWorkers workers(2);
  const std::string message = message_of([&] {
    run_tensor_parallel(workers, group, [&](int r) {
      std::vector<float> buffer(8, 1.0f), gathered(16);
      RoundCollectives round(group, r, kShape);
      round.all_reduce(buffer.data(), gathered.data(), 8, nullptr);
      if (r == 1) {
        while (collectives(fake, 0) < 2) std::this_thread::yield();
        throw Error("an illegal memory access was encountered");
      }
      round.all_reduce(buffer.data(), gathered.data(), 8, nullptr);
    });
  });
  EXPECT_EQ(message, "tensor-parallel rank 1 of 2: an illegal memory access was encountered");
  EXPECT_TRUE(group.aborted());
  for (int r = 0; r < 2; ++r) EXPECT_EQ(fake.calls(r).back(), "ncclCommAbort") << "rank " << r;
  EXPECT_NE(message_of([&] { expect_pass_runs(workers, group); }).find("the tensor-parallel group was stopped"),
            std::string::npos);
}

}  // namespace
}  // namespace fs::cuda

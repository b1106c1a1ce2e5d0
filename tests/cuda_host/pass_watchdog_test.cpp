// A pass's watchdog on the fake NCCL: a rank that never returns fails the pass at its deadline naming the ranks that
// had not returned, the aborted communicators release every rank and later passes are refused by name; an asynchronous
// NCCL error stops a stuck pass before its deadline; passes that finish are left alone.
#include "backends/cuda/host/pass_watchdog.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/host/rank_sum_order.h"
#include "backends/cuda/host/round_collectives.h"
#include "backends/cuda/host/tensor_parallel_pass.h"
#include "error_message.h"
#include "fake_nccl.h"
#include "host_round.h"

namespace fs::cuda {
namespace {

using namespace std::chrono_literals;
using test::FakeNccl;
using test::host_rank_sum;
using test::message_of;

constexpr RoundShape kShape{2, 4, 2, 1, 3};  // 2 layers, hidden 4, 2 rows, 1 logit row, 3 vocabulary rows per rank

std::vector<float> run_round(const TensorParallelGroup& group, int rank) {
  return test::run_host_round(group, rank, kShape);
}

std::string refusal(const std::string& first) {
  return "the tensor-parallel group was stopped after a failure (" + first + "); restart foldserve to run on it again";
}

void expect_aborted(const FakeNccl& fake, const TensorParallelGroup& group) {
  EXPECT_TRUE(group.aborted());
  for (int r = 0; r < group.ranks(); ++r) EXPECT_EQ(fake.calls(r).back(), "ncclCommAbort") << "rank " << r;
  EXPECT_EQ(fake.live_comms(), 0u);
}

// Both ranks are stuck in the round's first collective (rank 1 never meets rank 0); the abort at the deadline
// releases them long before the fake's own 10 s peer wait.
TEST(PassWatchdog, ARankThatNeverReturnsFailsThePassAtTheDeadlineAndTheGroupRefusesTheNext) {
  FakeNccl fake;
  TensorParallelGroup group({0, 1}, host_rank_sum());
  RankWorkers workers(2);
  fake.hang_next_collective(1);
  const auto start = std::chrono::steady_clock::now();
  const std::string message = message_of([&] {
    run_tensor_parallel(workers, group, [&](int r) { run_round(group, r); }, PassDeadline{100ms, 100ms});
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  const std::string first =
      "the tensor-parallel pass did not finish within 0.1 s (FOLDSERVE_TP_PASS_TIMEOUT_S); ranks 0, 1 of 2 had not "
      "returned, so the communicators were aborted";
  EXPECT_EQ(message, first);
  expect_aborted(fake, group);

  std::atomic<int> ran{0};
  EXPECT_EQ(message_of([&] { run_tensor_parallel(workers, group, [&](int) { ++ran; }, PassDeadline{100ms, 100ms}); }),
            refusal(first));
  EXPECT_EQ(ran, 0);
}

// Ranks 0 and 2 returned; only rank 1, inside a collective its peers never issue, is named.
TEST(PassWatchdog, TheErrorNamesOnlyTheRanksThatHadNotReturned) {
  FakeNccl fake;
  TensorParallelGroup group({0, 1, 2}, host_rank_sum());
  RankWorkers workers(3);
  fake.hang_next_collective(1);
  const std::string message = message_of([&] {
    run_tensor_parallel(
        workers, group,
        [&](int r) {
          if (r != 1) return;
          std::vector<float> send(4, 1.0f), gathered(12);
          group.all_gather(1, send.data(), gathered.data(), 4, nullptr);
        },
        PassDeadline{200ms, 10ms});
  });
  EXPECT_EQ(message,
            "the tensor-parallel pass did not finish within 0.2 s (FOLDSERVE_TP_PASS_TIMEOUT_S); rank 1 of 3 had not "
            "returned, so the communicators were aborted");
  expect_aborted(fake, group);
}

TEST(PassWatchdog, AnAsynchronousNcclErrorStopsAStuckPassBeforeItsDeadline) {
  FakeNccl fake;
  TensorParallelGroup group({0, 1}, host_rank_sum());
  RankWorkers workers(2);
  fake.hang_next_collective(1);
  fake.set_async_error(1, ncclUnhandledCudaError);
  const std::string message = message_of([&] {
    run_tensor_parallel(workers, group, [&](int r) { run_round(group, r); }, PassDeadline{60s, 5ms});
  });
  const std::string first =
      "the tensor-parallel pass was stopped by an NCCL error: NCCL communicator failed for rank 1 of 2: unhandled cuda "
      "error (1); ranks 0, 1 of 2 had not returned, so the communicators were aborted";
  EXPECT_EQ(message, first);
  expect_aborted(fake, group);
  EXPECT_EQ(message_of([&] { run_tensor_parallel(workers, group, [](int) {}); }), refusal(first));
}

std::atomic<int> async_error_reads{0};

// The fake's table, counting the watchdog's reads of the communicators' asynchronous errors.
NcclTable counting_async_errors(const NcclTable& fake) {
  static NcclTable base;
  base = fake;
  NcclTable table = fake;
  table.comm_get_async_error = [](ncclComm_t comm, ncclResult_t* error) {
    ++async_error_reads;
    return base.comm_get_async_error(comm, error);
  };
  return table;
}

// The watchdog polls while rank 0 holds the pass back, finds nothing and leaves the passes and communicators alone.
TEST(PassWatchdog, PassesThatFinishAreUnaffected) {
  FakeNccl fake;
  const NcclTable table = counting_async_errors(fake.table());
  ScopedNcclTable counting(table);
  TensorParallelGroup group({0, 1}, host_rank_sum());
  RankWorkers workers(2);
  for (int pass = 0; pass < 3; ++pass) {
    async_error_reads = 0;
    std::vector<std::vector<float>> sums(2);
    run_tensor_parallel(
        workers, group,
        [&](int r) {
          if (r == 0)
            while (async_error_reads < 4) std::this_thread::yield();
          sums[size_t(r)] = run_round(group, r);
        },
        PassDeadline{60s, 1ms});
    for (const auto& sum : sums) EXPECT_EQ(sum, std::vector<float>(8, 3.0f)) << "pass " << pass;
  }
  EXPECT_FALSE(group.aborted());
  for (int r = 0; r < 2; ++r) {
    const auto calls = fake.calls(r);
    EXPECT_EQ(std::count(calls.begin(), calls.end(), "ncclCommAbort"), 0) << "rank " << r;
  }
}

TEST(PassWatchdog, TheDeadlineComesFromTheEnvironment) {
  unsetenv(kPassTimeoutVariable);
  EXPECT_EQ(pass_deadline_from_env().timeout, 60s);
  setenv(kPassTimeoutVariable, "0.25", 1);
  EXPECT_EQ(pass_deadline_from_env().timeout, 250ms);
  setenv(kPassTimeoutVariable, "soon", 1);
  EXPECT_EQ(message_of([] { pass_deadline_from_env(); }),
            "FOLDSERVE_TP_PASS_TIMEOUT_S must be a positive number of seconds, not 'soon'");
  setenv(kPassTimeoutVariable, "0", 1);
  EXPECT_NE(message_of([] { pass_deadline_from_env(); }), "");
  unsetenv(kPassTimeoutVariable);
}

}  // namespace
}  // namespace fs::cuda

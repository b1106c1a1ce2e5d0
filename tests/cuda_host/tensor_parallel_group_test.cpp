// The tensor-parallel group on the fake NCCL: rank-ordered sums, the order of collectives, failing ranks.
#include "backends/cuda/host/tensor_parallel_group.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/host/rank_sum_order.h"
#include "core/error.h"
#include "fake_nccl.h"

namespace fs::cuda {
namespace {

using test::FakeNccl;

// The fake's buffers are host memory, so the host reference is the sum every rank runs.
RankSumLaunch host_rank_sum() {
  return [](const float* gathered, int ranks, std::size_t n, float* out, CUstream) {
    rank_sum_host(gathered, ranks, n, out);
  };
}

// Runs body(rank) on one thread per rank; returns each rank's fs::Error text ("" when it finished).
std::vector<std::string> on_every_rank(int ranks, const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const Error& e) {
        errors[std::size_t(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(RankSumOrder, SumsRanksInOrder) {
  // ((1e8 + 1) − 1e8) is 0 in f32; any other order gives 1.
  const std::vector<float> gathered = {1e8f, 2.0f, 1.0f, 3.0f, -1e8f, 4.0f};
  std::vector<float> out(2);
  rank_sum_host(gathered.data(), 3, 2, out.data());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 9.0f);
}

TEST(TensorParallelGroup, EveryRankGetsTheRankOrderedSumBitForBit) {
  FakeNccl fake;
  for (int ranks : {1, 2, 3, 4}) {
    TensorParallelGroup group(std::vector<int>(std::size_t(ranks), 0), host_rank_sum());
    ASSERT_EQ(group.ranks(), ranks);
    const std::vector<std::size_t> sizes = {1, 7, 4096, 3 * 4096 + 5};
    std::mt19937 rng(17 + ranks);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    // partials[size][rank]
    std::vector<std::vector<std::vector<float>>> partials;
    for (std::size_t n : sizes) {
      partials.emplace_back();
      for (int r = 0; r < ranks; ++r) {
        std::vector<float> p(n);
        for (auto& x : p) x = normal(rng);
        partials.back().push_back(p);
      }
    }
    std::vector<std::vector<std::vector<float>>> results(sizes.size(),
                                                         std::vector<std::vector<float>>(std::size_t(ranks)));
    auto errors = on_every_rank(ranks, [&](int rank) {
      for (std::size_t s = 0; s < sizes.size(); ++s) {
        std::vector<float> buffer = partials[s][std::size_t(rank)];
        std::vector<float> gathered(sizes[s] * std::size_t(ranks));
        group.all_reduce(rank, buffer.data(), gathered.data(), sizes[s], nullptr);
        results[s][std::size_t(rank)] = buffer;
      }
      group.check(rank);
    });
    for (const auto& e : errors) EXPECT_EQ(e, "");
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      std::vector<float> gathered, expected(sizes[s]);
      for (const auto& p : partials[s]) gathered.insert(gathered.end(), p.begin(), p.end());
      rank_sum_host(gathered.data(), ranks, sizes[s], expected.data());
      for (int r = 0; r < ranks; ++r)
        EXPECT_TRUE(same_bits(results[s][std::size_t(r)], expected)) << "ranks " << ranks << " size " << sizes[s];
    }
  }
  EXPECT_EQ(fake.live_comms(), 0u);
}

TEST(TensorParallelGroup, EachRankGathersOncePerAllReduceInCallOrder) {
  FakeNccl fake;
  {
    TensorParallelGroup group({0, 1}, host_rank_sum());
    on_every_rank(2, [&](int rank) {
      for (std::size_t n : {4u, 6u, 4u}) {
        std::vector<float> buffer(n, float(rank)), gathered(2 * n);
        group.all_reduce(rank, buffer.data(), gathered.data(), n, nullptr);
      }
    });
  }
  const std::vector<std::string> expected = {"ncclCommInitAll", "ncclAllGather 4", "ncclAllGather 6", "ncclAllGather 4",
                                             "ncclCommDestroy"};
  EXPECT_EQ(fake.calls(0), expected);
  EXPECT_EQ(fake.calls(1), expected);
}

TEST(TensorParallelGroup, AFailingRankIsAnErrorNamingItAndItsPeersSeeARemoteError) {
  FakeNccl fake;
  TensorParallelGroup group({0, 1, 2}, host_rank_sum());
  fake.fail_next_collective(1);
  std::vector<std::string> checks(3);
  auto errors = on_every_rank(3, [&](int rank) {
    std::vector<float> buffer(8, 1.0f), gathered(24);
    try {
      group.all_reduce(rank, buffer.data(), gathered.data(), 8, nullptr);
    } catch (const Error&) {
      try {
        group.check(rank);
      } catch (const Error& e) {
        checks[std::size_t(rank)] = e.what();
      }
      throw;
    }
  });
  EXPECT_EQ(errors[1], "ncclAllGather failed for rank 1 of 3: unhandled cuda error (1)");
  for (int r : {0, 2}) {
    EXPECT_EQ(errors[std::size_t(r)], "ncclAllGather failed for rank " + std::to_string(r) +
                                          " of 3: remote process exited or there was a network error (6)");
    EXPECT_NE(checks[std::size_t(r)].find("rank " + std::to_string(r) + " of 3"), std::string::npos);
  }
  EXPECT_NE(checks[1].find("NCCL communicator failed for rank 1 of 3: unhandled cuda error"), std::string::npos)
      << checks[1];
}

TEST(TensorParallelGroup, AFailedGroupAbortsItsCommunicatorsInsteadOfDestroyingThem) {
  FakeNccl fake;
  {
    TensorParallelGroup group({0, 1}, host_rank_sum());
    fake.fail_next_collective(0);
    on_every_rank(2, [&](int rank) {
      std::vector<float> buffer(4), gathered(8);
      group.all_reduce(rank, buffer.data(), gathered.data(), 4, nullptr);
    });
  }
  for (int r = 0; r < 2; ++r) EXPECT_EQ(fake.calls(r).back(), "ncclCommAbort") << "rank " << r;
  EXPECT_EQ(fake.live_comms(), 0u);
}

TEST(TensorParallelGroup, RanksCallingDifferentCollectivesIsAnError) {
  FakeNccl fake;
  TensorParallelGroup group({0, 1}, host_rank_sum());
  auto errors = on_every_rank(2, [&](int rank) {
    const std::size_t n = rank == 0 ? 4 : 5;
    std::vector<float> buffer(n), gathered(2 * n);
    group.all_reduce(rank, buffer.data(), gathered.data(), n, nullptr);
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(errors[std::size_t(r)].find("rank " + std::to_string(r) + " of 2: invalid usage"), std::string::npos)
        << errors[std::size_t(r)];
}

TEST(TensorParallelGroup, RefusedInitNamesTheDevices) {
  NcclTable table;
  table.comm_init_all = [](ncclComm_t*, int, const int*) { return ncclUnhandledCudaError; };
  table.get_error_string = [](ncclResult_t) { return "unhandled cuda error"; };
  ScopedNcclTable installed(table);
  try {
    TensorParallelGroup group({0, 1}, host_rank_sum());
    FAIL() << "init should have failed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "ncclCommInitAll failed for devices 0,1: unhandled cuda error (1)");
  }
}

}  // namespace
}  // namespace fs::cuda

// The tensor-parallel group on real NCCL: every rank holds the host's rank-ordered sum bit for bit, eager and
// replayed from a CUDA graph; TP = 1 on one GPU, TP = 2 with two (each skips with fewer GPUs or without NCCL).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "backends/cuda/host/graph.h"
#include "backends/cuda/host/nccl_table.h"
#include "backends/cuda/host/rank_sum_order.h"
#include "backends/cuda/host/tensor_parallel_group.h"
#include "backends/cuda/kernels/rank_sum_ops.h"
#include "gpu_fixture.h"

namespace fs::test {
namespace {

int visible_gpus() {
  try {
    return cuda::device_count();
  } catch (const std::exception&) {
    return 0;
  }
}

#define FS_REQUIRE_GPUS_AND_NCCL(count)                                                               \
  if (visible_gpus() < (count)) GTEST_SKIP() << "needs " << (count) << " GPUs";                       \
  if (cuda::nccl_description().rfind("not available", 0) == 0) GTEST_SKIP() << "no NCCL";             \
  setenv("NCCL_NVLS_ENABLE", "0", 1)

std::unique_ptr<cuda::TensorParallelGroup> group_of(int ranks) {
  std::vector<int> devices;
  for (int r = 0; r < ranks; ++r) devices.push_back(r);
  return std::make_unique<cuda::TensorParallelGroup>(
      devices, [](const float* gathered, int count, size_t n, float* out, cuda::CUstream stream) {
        cuda::kernels::rank_sum(gathered, count, n, out, stream);
      });
}

// Each rank all-reduces its random partials of every size (eager, then the same calls captured and replayed from
// fresh partials); every result must be the host's rank-ordered sum of the partials, bit for bit.
void expect_rank_ordered_sums(int ranks) {
  auto group = group_of(ranks);
  const std::vector<size_t> sizes = {1, 4096, 16 * 4096 + 3};
  const size_t count = static_cast<size_t>(ranks);
  std::vector<std::vector<std::vector<float>>> partials(count);  // [rank][size]
  for (int r = 0; r < ranks; ++r) {
    std::mt19937 rng(40 + r);
    for (size_t n : sizes) partials[size_t(r)].push_back(random_floats(rng, n, 5.0f));
  }
  std::vector<std::vector<std::vector<float>>> eager(count), graphed(count);
  std::vector<std::string> errors(count);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        cuda::Device device(r);
        cuda::Stream stream;
        cuda::DeviceArena arena(size_t(64) << 20, "tensor-parallel test");
        std::vector<float*> buffers, gathered;
        for (size_t n : sizes) {
          buffers.push_back(reinterpret_cast<float*>(arena.allocate(n * sizeof(float), "partial").ptr));
          gathered.push_back(reinterpret_cast<float*>(arena.allocate(n * ranks * sizeof(float), "gathered").ptr));
        }
        auto upload = [&] {
          for (size_t s = 0; s < sizes.size(); ++s)
            FS_CU(memcpy_htod_async, cuda::CUdeviceptr(reinterpret_cast<uintptr_t>(buffers[s])),
                  partials[size_t(r)][s].data(), sizes[s] * sizeof(float), stream.handle());
        };
        auto reduce_all = [&] {
          for (size_t s = 0; s < sizes.size(); ++s)
            group->all_reduce(r, buffers[s], gathered[s], sizes[s], stream.handle());
        };
        auto download = [&](std::vector<std::vector<float>>& into) {
          for (size_t s = 0; s < sizes.size(); ++s) {
            into.emplace_back(sizes[s]);
            FS_CU(memcpy_dtoh_async, into.back().data(), cuda::CUdeviceptr(reinterpret_cast<uintptr_t>(buffers[s])),
                  sizes[s] * sizeof(float), stream.handle());
          }
          stream.synchronize();
          group->check(r);
        };
        upload();
        reduce_all();
        download(eager[size_t(r)]);
        cuda::CapturedGraph graph(stream.handle(), reduce_all);
        upload();
        graph.launch(stream.handle());
        download(graphed[size_t(r)]);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) ASSERT_EQ(errors[size_t(r)], "") << "rank " << r;
  for (size_t s = 0; s < sizes.size(); ++s) {
    std::vector<float> all, expected(sizes[s]);
    for (int r = 0; r < ranks; ++r) all.insert(all.end(), partials[size_t(r)][s].begin(), partials[size_t(r)][s].end());
    cuda::rank_sum_host(all.data(), ranks, sizes[s], expected.data());
    for (int r = 0; r < ranks; ++r) {
      EXPECT_EQ(std::memcmp(eager[size_t(r)][s].data(), expected.data(), sizes[s] * sizeof(float)), 0)
          << "eager, rank " << r << ", size " << sizes[s];
      EXPECT_EQ(std::memcmp(graphed[size_t(r)][s].data(), expected.data(), sizes[s] * sizeof(float)), 0)
          << "graph, rank " << r << ", size " << sizes[s];
    }
  }
}

TEST(CudaTensorParallel, OneRankIsTheIdentityThroughTheSameCode) {
  FS_REQUIRE_GPUS_AND_NCCL(1);
  expect_rank_ordered_sums(1);
}

TEST(CudaTensorParallel, TwoRanksHoldTheRankOrderedSumBitForBit) {
  FS_REQUIRE_GPUS_AND_NCCL(2);
  expect_rank_ordered_sums(2);
}

}  // namespace
}  // namespace fs::test

// The rank-ordered sum kernel against its host reference, bit for bit, and a row's bits against the rows beside it.
#include <gtest/gtest.h>

#include <cstring>

#include "backends/cuda/host/rank_sum_order.h"
#include "backends/cuda/kernels/rank_sum_ops.h"
#include "gpu_fixture.h"

namespace fs::test {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CudaRankSum, MatchesTheHostReferenceBitForBit) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(3);
  for (int ranks : {1, 2, 3, 8})
    for (size_t n : {size_t(1), size_t(255), size_t(4096), size_t(64) * 4096 + 3, size_t(1) << 21}) {
      const auto gathered = random_floats(rng, size_t(ranks) * n, 10.0f);
      std::vector<float> expected(n);
      cuda::rank_sum_host(gathered.data(), ranks, n, expected.data());
      float* out = gpu.poisoned<float>(n);
      cuda::kernels::rank_sum(gpu.upload(gathered), ranks, n, out, gpu.stream());
      EXPECT_TRUE(same_bits(gpu.download(out, n), expected)) << "ranks " << ranks << " n " << n;
    }
}

TEST(CudaRankSum, OrderIsRankOrderNotAnyOther) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  // ((1e8 + 1) − 1e8) is 0 in f32; summing in any other order gives 1.
  const std::vector<float> gathered = {1e8f, 1.0f, -1e8f};
  float* out = gpu.poisoned<float>(1);
  cuda::kernels::rank_sum(gpu.upload(gathered), 3, 1, out, gpu.stream());
  EXPECT_EQ(gpu.download(out, 1)[0], 0.0f);
}

TEST(CudaRankSum, InPlaceIntoRowZero) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(4);
  const size_t n = 5000;
  const auto gathered = random_floats(rng, 2 * n);
  std::vector<float> expected(n);
  cuda::rank_sum_host(gathered.data(), 2, n, expected.data());
  float* device = gpu.upload(gathered);
  cuda::kernels::rank_sum(device, 2, n, device, gpu.stream());
  EXPECT_TRUE(same_bits(gpu.download(device, n), expected));
}

TEST(CudaRankSum, ARowsBitsDoNotDependOnTheRowsBesideIt) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(5);
  const int ranks = 2, rows = 64, hidden = 4096;
  const size_t n = size_t(rows) * hidden;
  const auto gathered = random_floats(rng, ranks * n);
  float* all = gpu.poisoned<float>(n);
  cuda::kernels::rank_sum(gpu.upload(gathered), ranks, n, all, gpu.stream());
  const auto together = gpu.download(all, n);
  for (int row : {0, 17, rows - 1}) {
    std::vector<float> alone_in;
    for (int r = 0; r < ranks; ++r)
      alone_in.insert(alone_in.end(), gathered.begin() + long(r * n + size_t(row) * hidden),
                      gathered.begin() + long(r * n + size_t(row + 1) * hidden));
    float* alone = gpu.poisoned<float>(hidden);
    cuda::kernels::rank_sum(gpu.upload(alone_in), ranks, hidden, alone, gpu.stream());
    const std::vector<float> expected(together.begin() + long(size_t(row) * hidden),
                                      together.begin() + long(size_t(row + 1) * hidden));
    EXPECT_TRUE(same_bits(gpu.download(alone, hidden), expected)) << "row " << row;
  }
}

}  // namespace
}  // namespace fs::test

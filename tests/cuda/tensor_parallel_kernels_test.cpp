// A tensor-parallel rank's kernels against their host definitions: the embedding of its vocabulary slice (zeros for
// other ids, so the ranks' rows sum to the whole embedding bit for bit), the residual add, and the gathered logit
// slices laid out as whole rows.
#include <gtest/gtest.h>

#include "backends/cuda/kernels/tensor_parallel_ops.h"
#include "core/dtype.h"
#include "gpu_fixture.h"

namespace fs::test {
namespace {

namespace k = cuda::kernels;

TEST(CudaTensorParallelKernels, VocabularySlicesOfTheEmbeddingSumToTheWhole) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(5);
  const int vocab = 96, dim = 40, ranks = 3, slice = vocab / ranks;
  std::vector<uint16_t> table(size_t(vocab) * dim);
  for (auto& v : table) v = f32_to_bf16(std::normal_distribution<float>(0, 1)(rng));
  const std::vector<int32_t> ids = {0, 31, 32, 95, 64, 7, 63};
  const int rows = int(ids.size());
  const int32_t* dev_ids = gpu.upload(ids);
  std::vector<float> sum(size_t(rows) * dim, 0.0f);
  for (int r = 0; r < ranks; ++r) {
    std::vector<uint16_t> mine(table.begin() + ptrdiff_t(r) * slice * dim, table.begin() + ptrdiff_t(r + 1) * slice * dim);
    float* out = gpu.poisoned<float>(size_t(rows) * dim);
    k::embedding_slice(gpu.upload(mine), dev_ids, rows, dim, r * slice, slice, out, gpu.stream());
    const auto got = gpu.download(out, size_t(rows) * dim);
    for (int i = 0; i < rows; ++i)
      for (int d = 0; d < dim; ++d) {
        const bool own = ids[size_t(i)] / slice == r;
        const float want = own ? bf16_to_f32(table[size_t(ids[size_t(i)]) * dim + d]) : 0.0f;
        ASSERT_EQ(got[size_t(i) * dim + d], want) << r << " " << i << " " << d;
        sum[size_t(i) * dim + d] += got[size_t(i) * dim + d];
      }
  }
  for (int i = 0; i < rows; ++i)
    for (int d = 0; d < dim; ++d) EXPECT_EQ(sum[size_t(i) * dim + d], bf16_to_f32(table[size_t(ids[size_t(i)]) * dim + d]));
}

TEST(CudaTensorParallelKernels, AddInPlaceAndInterleavedSlices) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(6);
  for (size_t n : {size_t(1), size_t(4096), size_t(3) << 20}) {
    auto x = random_floats(rng, n), y = random_floats(rng, n);
    float* dx = gpu.upload(x);
    k::add_in_place(dx, gpu.upload(y), n, gpu.stream());
    const auto got = gpu.download(dx, n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], x[i] + y[i]) << i;
  }
  for (auto [ranks, rows, slice] : {std::tuple{2, 1, 5}, {2, 7, 1000}, {4, 3, 33}}) {
    const auto gathered = random_floats(rng, size_t(ranks) * rows * slice);
    float* out = gpu.poisoned<float>(size_t(rows) * ranks * slice);
    k::interleave_slices(gpu.upload(gathered), ranks, rows, slice, out, gpu.stream());
    const auto got = gpu.download(out, size_t(rows) * ranks * slice);
    for (int r = 0; r < ranks; ++r)
      for (int row = 0; row < rows; ++row)
        for (int i = 0; i < slice; ++i)
          ASSERT_EQ(got[(size_t(row) * ranks + r) * slice + i], gathered[(size_t(r) * rows + row) * slice + i]);
  }
}

}  // namespace
}  // namespace fs::test

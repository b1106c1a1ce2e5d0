// The CPU matmul's kernels give the same bits: the AVX-512 kernel on packed weights == the AVX2 kernel on row-major
// weights, for every shape, dtype and row count, and a row's result never depends on the rows beside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/matmul_kernels.h"
#include "backends/cpu/ops.h"
#include "core/thread_pool.h"

namespace fs::cpu {
namespace {

// Random weights of one shape and dtype, with the storage a WeightMatrix borrows.
struct RandomWeights {
  std::vector<uint16_t> bf16;
  std::vector<float> f32;
  WeightMatrix w;

  RandomWeights(int rows, int cols, DType dtype, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const size_t n = size_t(rows) * size_t(cols);
    w.dtype = dtype;
    w.rows = rows;
    w.cols = cols;
    if (dtype == DType::BF16) {
      for (size_t i = 0; i < n; ++i) bf16.push_back(f32_to_bf16(dist(rng)));
      w.data = bf16.data();
    } else {
      for (size_t i = 0; i < n; ++i) f32.push_back(dist(rng));
      w.data = f32.data();
    }
  }
};

std::vector<float> random_inputs(int rows, int cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(rows) * size_t(cols));
  for (float& v : x) v = dist(rng);
  return x;
}

bool same_bits(const std::vector<float>& a, const float* b, size_t n) {
  return a.size() >= n && std::memcmp(a.data(), b, n * sizeof(float)) == 0;
}

struct Shape {
  int n, k;
};
// Full and partial panels, K below, at and off a multiple of 16 and of 32 (bf16 packs columns in pairs of 16-blocks:
// 48 and 56 leave one block of 16 after the pairs, 56 and 100 a tail after that), the fortune-demo and fortune-draft
// shapes.
const Shape kShapes[] = {{1, 16}, {3, 5}, {8, 384}, {13, 100}, {33, 257}, {64, 1024}, {130, 48},
                         {384, 384}, {9, 56}, {22, 640}, {6, 31}};

TEST(CpuMatmul, PackedAvx512KernelEqualsAvx2Bits) {
  if (!avx512_available()) GTEST_SKIP() << "this CPU has no AVX-512";
  uint32_t seed = 1;
  for (DType dtype : {DType::BF16, DType::F32})
    for (const Shape& s : kShapes) {
      RandomWeights rw(s.n, s.k, dtype, seed++);
      std::vector<uint8_t> packed(rw.w.bytes());
      pack_rows(rw.w, packed.data());
      WeightMatrix wp = rw.w;
      wp.packed = std::shared_ptr<const uint8_t>(std::shared_ptr<void>(), packed.data());
      for (int rows = 1; rows <= 17; ++rows) {
        SCOPED_TRACE(::testing::Message() << "N " << s.n << " K " << s.k << " rows " << rows << " dtype "
                                          << dtype_name(dtype));
        const auto x = random_inputs(rows, s.k, seed++);
        const size_t out = size_t(rows) * size_t(s.n);
        std::vector<float> want(out), got(out, -1.0f);
        matmul_range_avx2(x.data(), rows, rw.w, 0, size_t(s.n), want.data());
        // Ranges that start and end inside panels, as a thread's share may.
        const size_t cut = size_t(s.n) / 3 + 1;
        matmul_range_avx512(x.data(), rows, wp, 0, std::min(cut, size_t(s.n)), got.data());
        matmul_range_avx512(x.data(), rows, wp, std::min(cut, size_t(s.n)), size_t(s.n), got.data());
        EXPECT_TRUE(same_bits(want, got.data(), out));
      }
    }
}

TEST(CpuMatmul, PackingKeepsResultBitsAndSharesCopies) {
  RandomWeights a(70, 200, DType::BF16, 7), b(24, 200, DType::F32, 8);
  WeightMatrix a_twin = a.w;  // the same weights twice, as a tied head
  std::vector<WeightMatrix> plain{a.w, b.w};
  std::vector<WeightMatrix*> all{&a.w, &b.w, &a_twin};
  const size_t block = pack_for_matmul(all);
  if (avx512_available()) {
    ASSERT_TRUE(a.w.packed && b.w.packed);
    EXPECT_EQ(a.w.packed.get(), a_twin.packed.get());
    EXPECT_GE(block, a.w.bytes() + b.w.bytes());  // the block it reports holds one copy of each distinct matrix
  } else {
    EXPECT_FALSE(a.w.packed || b.w.packed);
    EXPECT_EQ(block, 0u);
  }
  const std::vector<float> bias = random_inputs(1, 70, 9);
  for (int rows : {1, 4, 9}) {
    const auto x = random_inputs(rows, 200, 10 + rows);
    for (size_t i = 0; i < plain.size(); ++i) {
      const WeightMatrix& packed = i == 0 ? a.w : b.w;
      const size_t out = size_t(rows) * size_t(packed.rows);
      std::vector<float> want(out), got(out);
      const float* with_bias = i == 0 ? bias.data() : nullptr;
      matmul(x.data(), rows, plain[i], with_bias, want.data());
      matmul(x.data(), rows, packed, with_bias, got.data());
      EXPECT_TRUE(same_bits(want, got.data(), out)) << "matrix " << i << " rows " << rows;
    }
  }
}

TEST(CpuMatmul, RowsAloneEqualRowsAmongOthers) {
  for (bool pack : {false, true})
    for (const Shape& s : {Shape{384, 384}, Shape{1024, 384}, Shape{45, 1000}}) {
      SCOPED_TRACE(::testing::Message() << "N " << s.n << " K " << s.k << (pack ? " packed" : " row-major"));
      RandomWeights rw(s.n, s.k, DType::BF16, uint32_t(s.n + s.k));
      std::vector<WeightMatrix*> one{&rw.w};
      if (pack) pack_for_matmul(one);
      const int total = 19;
      const auto x = random_inputs(total, s.k, 3);
      std::vector<float> alone(size_t(total) * size_t(s.n));
      for (int r = 0; r < total; ++r)
        matmul(x.data() + size_t(r) * size_t(s.k), 1, rw.w, nullptr, alone.data() + size_t(r) * size_t(s.n));
      for (int rows = 2; rows <= total; ++rows) {
        std::vector<float> together(size_t(rows) * size_t(s.n));
        matmul(x.data(), rows, rw.w, nullptr, together.data());
        EXPECT_TRUE(same_bits(alone, together.data(), together.size())) << rows << " rows";
      }
    }
}

TEST(CpuMatmul, MatmulsEqualOneMatmulEach) {
  for (bool pack : {false, true}) {
    // Full and partial panels, a bias, bf16 and f32, as the pool's threads split their panels end to end.
    RandomWeights a(384, 384, DType::BF16, 21), b(130, 384, DType::BF16, 22), c(66, 384, DType::F32, 23);
    std::vector<WeightMatrix*> all{&a.w, &b.w, &c.w};
    if (pack) pack_for_matmul(all);
    const std::vector<float> bias = random_inputs(1, 130, 24);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      ThreadPool::Use use(pool);
      for (int rows : {1, 2, 3, 4, 5, 9}) {
        SCOPED_TRACE(::testing::Message() << (pack ? "packed" : "row-major") << " threads " << threads << " rows "
                                          << rows);
        const auto x = random_inputs(rows, 384, uint32_t(30 + rows));
        std::vector<std::vector<float>> want, got;
        for (const WeightMatrix* w : all) {
          want.emplace_back(size_t(rows) * size_t(w->rows));
          got.emplace_back(want.back().size(), -1.0f);
        }
        const float* biases[] = {nullptr, bias.data(), nullptr};
        for (size_t i = 0; i < all.size(); ++i) matmul(x.data(), rows, *all[i], biases[i], want[i].data());
        const MatmulOut outs[] = {{all[0], biases[0], got[0].data()},
                                  {all[1], biases[1], got[1].data()},
                                  {all[2], biases[2], got[2].data()}};
        matmuls(x.data(), rows, outs);
        for (size_t i = 0; i < all.size(); ++i)
          EXPECT_TRUE(same_bits(want[i], got[i].data(), want[i].size())) << "matrix " << i;
      }
    }
  }
}

}  // namespace
}  // namespace fs::cpu

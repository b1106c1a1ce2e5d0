// CPU paged attention gives the bits of the plain key-by-key loop: cpu::dot per key, std::exp, the sum in key order,
// cpu::axpy of each value, over head sizes with and without tails past 8 and 32 and key counts around multiples of 4
// and 8.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/ops.h"
#include "core/thread_pool.h"
#include "models/kv_pool.h"
#include "models/paged_attention.h"

namespace fs::test {
namespace {

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// One query head over keys/values [n, stride] (the head's dims at offset 0 of each row).
void key_by_key(const float* q, const float* k, const float* v, int n, size_t stride, int hd, float* out) {
  const float scale = 1.0f / std::sqrt(float(hd));
  std::vector<float> s(static_cast<size_t>(n));
  float mx = -INFINITY;
  for (int j = 0; j < n; ++j) mx = std::max(mx, s[size_t(j)] = cpu::dot(q, k + size_t(j) * stride, hd) * scale);
  float sum = 0;
  for (int j = 0; j < n; ++j) sum += (s[size_t(j)] = std::exp(s[size_t(j)] - mx));
  std::fill_n(out, hd, 0.0f);
  for (int j = 0; j < n; ++j) cpu::axpy(s[size_t(j)] / sum, v + size_t(j) * stride, out, hd);
}

// The query heads of a K/V head run together and threads split them at any head: group sizes 1 to 7, 1 to 3 threads.
struct Grouping {
  int heads, kv_heads, threads;
};

TEST(PagedAttention, GivesTheBitsOfTheKeyByKeyLoop) {
  for (const Grouping& grouping : {Grouping{4, 2, 1}, Grouping{4, 2, 2}, Grouping{2, 2, 2}, Grouping{6, 2, 2},
                                   Grouping{6, 2, 3}, Grouping{4, 1, 3}, Grouping{7, 1, 2}})
    for (int hd : {8, 36, 64, 72, 128, 136}) {
      const int heads = grouping.heads, kv_heads = grouping.kv_heads;
      SCOPED_TRACE(::testing::Message() << "head_dim " << hd << " heads " << heads << " kv_heads " << kv_heads
                                        << " threads " << grouping.threads);
      ThreadPool threads(grouping.threads);
      ThreadPool::Use use(threads);
      std::mt19937 rng{uint32_t(hd + 1000 * heads + 100 * kv_heads)};
      const int P = 16, slots = 41, kv = kv_heads * hd, qw = heads * hd;
      const int npages = (slots + P - 1) / P;
      KvPool pool(1, kv_heads, hd, P, npages);
      std::vector<int32_t> pages;
      for (int i = 0; i < npages; ++i) pages.push_back(*pool.allocate());
      const auto k = random_floats(size_t(slots) * kv, rng), v = random_floats(size_t(slots) * kv, rng);
      const auto q = random_floats(size_t(slots) * qw, rng);
      const std::vector<int32_t> tokens(size_t(slots), 0);
      const SequenceChunk chunk{tokens, 0, pages, true};
      std::vector<int> positions(static_cast<size_t>(slots)), chunk_of(static_cast<size_t>(slots), 0);
      for (int s = 0; s < slots; ++s) positions[size_t(s)] = s;
      const AttentionRows rows{std::span<const SequenceChunk>(&chunk, 1), positions, chunk_of};
      store_paged_kv(rows, 0, k.data(), v.data(), pool);
      std::vector<float> out(static_cast<size_t>(slots) * qw);
      paged_attention(rows, {heads, kv_heads, hd}, pool, 0, q.data(), out.data());

      std::vector<float> want(static_cast<size_t>(hd));
      for (int t = 0; t < slots; ++t)
        for (int h = 0; h < heads; ++h) {
          const size_t g = size_t(h / (heads / kv_heads)) * size_t(hd);
          key_by_key(q.data() + size_t(t * qw + h * hd), k.data() + g, v.data() + g, t + 1, size_t(kv), hd,
                     want.data());
          ASSERT_EQ(std::memcmp(want.data(), out.data() + size_t(t * qw + h * hd), size_t(hd) * sizeof(float)), 0)
              << "row " << t << " head " << h;
        }
    }
}

}  // namespace
}  // namespace fs::test

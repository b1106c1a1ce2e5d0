// The gated-attention split (query|gate with q/k norm, partial rotary and the K/V store) against the CPU layer's
// steps on random inputs, and a row's bits against the rows beside it; attention_test.cpp checks the output gate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "backends/cuda/kernels/gated_attention_ops.h"
#include "core/dtype.h"
#include "gpu_fixture.h"
#include "models/gated_attention.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

namespace k = cuda::kernels;

struct Case {
  int heads, kv_heads, head_dim, rotary_dim;
};

std::string name(const Case& c) {
  return std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " heads, hd " + std::to_string(c.head_dim) +
         " rotary " + std::to_string(c.rotary_dim);
}

std::vector<float> columns(const std::vector<float>& rows, int width, int first_row, int n, int at, int count) {
  std::vector<float> out(size_t(n) * count);
  for (int r = 0; r < n; ++r)
    std::copy_n(rows.data() + size_t(first_row + r) * width + at, count, out.data() + size_t(r) * count);
  return out;
}

// Random rows of a fused q|k|v projection, their rotary angles, norms and scattered cache slots.
struct Problem {
  Case c;
  int T;
  std::vector<float> qkv, cos, sin, q_norm, k_norm;
  std::vector<int32_t> slots;
  int cache_slots;

  Problem(std::mt19937& rng, Case cs, int rows) : c(cs), T(rows), cache_slots(rows + 9) {
    const int hd = c.head_dim, half = c.rotary_dim / 2;
    qkv = random_floats(rng, size_t(T) * width());
    std::uniform_real_distribution<float> angle(-3.0f, 3.0f);
    for (int i = 0; i < T * half; ++i) {
      const float a = angle(rng);
      cos.push_back(std::cos(a));
      sin.push_back(std::sin(a));
    }
    q_norm = random_floats(rng, size_t(hd));
    k_norm = random_floats(rng, size_t(hd));
    for (float& w : q_norm) w += 1.0f;
    for (float& w : k_norm) w += 1.0f;
    std::vector<int32_t> all(static_cast<size_t>(cache_slots));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    slots.assign(all.begin(), all.begin() + T);
  }
  int Q() const { return c.heads * c.head_dim; }
  int KV() const { return c.kv_heads * c.head_dim; }
  int width() const { return 2 * Q() + 2 * KV(); }
};

struct GpuOut {
  std::vector<float> q, gate, keys, values;  // keys and values: the whole cache as floats
};

// Runs rows [first, first + n) of the problem into a fresh cache.
GpuOut run_gpu(Gpu& gpu, const Problem& p, int first, int n) {
  const int half = p.c.rotary_dim / 2, Q = p.Q(), KV = p.KV();
  const size_t cache = size_t(p.cache_slots) * KV;
  k::PagedKv kv;
  kv.keys = gpu.poisoned<uint16_t>(cache);
  kv.values = gpu.poisoned<uint16_t>(cache);
  kv.row_slot = gpu.upload(std::vector<int32_t>(p.slots.begin() + first, p.slots.begin() + first + n));
  kv.page_tokens = 16;
  float* q = gpu.poisoned<float>(size_t(n) * Q);
  float* gate = gpu.poisoned<float>(size_t(n) * Q);
  k::gated_qkv_rope_store(gpu.upload(columns(p.qkv, p.width(), first, n, 0, p.width())), n,
                          {p.c.heads, p.c.kv_heads, p.c.head_dim}, p.c.rotary_dim, gpu.upload(p.q_norm),
                          gpu.upload(p.k_norm), 1e-6f, gpu.upload(columns(p.cos, half, first, n, 0, half)),
                          gpu.upload(columns(p.sin, half, first, n, 0, half)), kv, q, gate, gpu.stream());
  return {gpu.download(q, size_t(n) * Q), gpu.download(gate, size_t(n) * Q),
          from_bf16(gpu.download(kv.keys, cache)), from_bf16(gpu.download(kv.values, cache))};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const Case kCases[] = {{4, 2, 64, 16}, {8, 2, 256, 64}, {3, 1, 32, 32}, {6, 2, 128, 32}, {2, 1, 48, 24}};

// Calls check(gpu, problem, all rows run on the GPU) for each case's random problem of 37 rows, drawn from an rng
// seeded `seed`, on a fresh GPU; stops at the first fatal failure.
template <class Check>
void for_each_case(uint32_t seed, Check check) {
  std::mt19937 rng(seed);
  for (const Case& c : kCases) {
    SCOPED_TRACE(name(c));
    Gpu gpu;
    const Problem p(rng, c, 37);
    check(gpu, p, run_gpu(gpu, p, 0, p.T));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(CudaGatedAttention, QkvRopeStoreMatchesCpu) {
  FS_REQUIRE_GPU();
  for_each_case(21, [](Gpu&, const Problem& p, const GpuOut& got) {
    const Case& c = p.c;
    const int Q = p.Q(), KV = p.KV(), W = p.width();
    GatedAttentionShape shape{c.heads, c.kv_heads, c.head_dim, c.rotary_dim, 1e-6f};
    std::vector<float> q(size_t(p.T) * Q), gate(size_t(p.T) * Q), key = columns(p.qkv, W, 0, p.T, 2 * Q, KV);
    gated_attention_qk(shape, p.q_norm.data(), p.k_norm.data(), p.cos.data(), p.sin.data(), p.T,
                       columns(p.qkv, W, 0, p.T, 0, 2 * Q).data(), q.data(), gate.data(), key.data());
    EXPECT_LE(rel_l2(got.q, q), 1e-5);
    EXPECT_TRUE(same_bits(got.gate, gate));
    const auto value = from_bf16(to_bf16(columns(p.qkv, W, 0, p.T, 2 * Q + KV, KV)));
    const auto key_bf16 = from_bf16(to_bf16(key));
    for (int r = 0; r < p.T; ++r)
      for (int i = 0; i < KV; ++i) {
        const size_t at = size_t(p.slots[size_t(r)]) * KV + size_t(i), want = size_t(r) * KV + size_t(i);
        // Keys went through fp32 arithmetic in another order first: allow one bf16 step.
        ASSERT_LE(std::fabs(got.keys[at] - key_bf16[want]), std::fabs(key_bf16[want]) / 128 + 1e-30f) << "row " << r;
        ASSERT_EQ(got.values[at], value[want]) << "row " << r;
      }
  });
}

TEST(CudaGatedAttention, QkvRopeStoreRowBitsDoNotDependOnOtherRows) {
  FS_REQUIRE_GPU();
  for_each_case(22, [](Gpu& gpu, const Problem& p, const GpuOut& all) {
    const int Q = p.Q(), KV = p.KV();
    for (auto [first, n] : {std::pair{0, 1}, {20, 1}, {3, 9}, {36, 1}}) {
      SCOPED_TRACE("rows " + std::to_string(first) + ".." + std::to_string(first + n));
      const GpuOut part = run_gpu(gpu, p, first, n);
      EXPECT_TRUE(same_bits(part.q, columns(all.q, Q, first, n, 0, Q)));
      EXPECT_TRUE(same_bits(part.gate, columns(all.gate, Q, first, n, 0, Q)));
      for (int r = first; r < first + n; ++r) {
        const size_t at = size_t(p.slots[size_t(r)]) * KV;
        EXPECT_EQ(0, std::memcmp(part.keys.data() + at, all.keys.data() + at, size_t(KV) * sizeof(float)));
        EXPECT_EQ(0, std::memcmp(part.values.data() + at, all.values.data() + at, size_t(KV) * sizeof(float)));
      }
    }
  });
}

}  // namespace
}  // namespace fs::test

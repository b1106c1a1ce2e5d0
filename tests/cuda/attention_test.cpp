// q/k norm + RoPE + paged KV store, and causal GQA attention over pages, against plain CPU loops.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cpu/ops.h"
#include "backends/cuda/kernels/ops.h"
#include "core/dtype.h"
#include "gpu_fixture.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

namespace k = cuda::kernels;

struct Case {
  int heads, kv_heads, head_dim;
  bool norm;
};

TEST(CudaKernels, RopeStoreAndPagedAttentionMatchCpu) {
  FS_REQUIRE_GPU();
  std::mt19937 rng(4);
  for (Case cs : {Case{4, 2, 32, true}, Case{3, 1, 16, false}, Case{32, 8, 128, true}, Case{6, 2, 64, false}}) {
    SCOPED_TRACE("heads " + std::to_string(cs.heads) + "/" + std::to_string(cs.kv_heads) + " hd " +
                 std::to_string(cs.head_dim));
    Gpu gpu;
    const int P = 16, hd = cs.head_dim, half = hd / 2, nh = cs.heads, nkv = cs.kv_heads;
    const int Q = nh * hd, KV = nkv * hd, W = Q + 2 * KV, pages_total = 24;
    // Two streams: 70 positions on pages {5, 2, 9, 11, 20}, 21 on pages {0, 7}.
    std::vector<std::vector<int32_t>> tables = {{5, 2, 9, 11, 20}, {0, 7}};
    std::vector<int> lengths = {70, 21};
    std::vector<int32_t> slot, keys, table_at, pages;
    std::vector<int> stream_of, pos_of;
    for (size_t s = 0; s < tables.size(); ++s) {
      int at = int(pages.size());
      pages.insert(pages.end(), tables[s].begin(), tables[s].end());
      for (int p = 0; p < lengths[s]; ++p) {
        slot.push_back(tables[s][size_t(p / P)] * P + p % P);
        keys.push_back(p + 1);
        table_at.push_back(at);
        stream_of.push_back(int(s));
        pos_of.push_back(p);
      }
    }
    const int T = int(slot.size());
    auto qkv = random_floats(rng, size_t(T) * W);
    auto qn = random_floats(rng, size_t(hd)), kn = random_floats(rng, size_t(hd));
    std::vector<float> cos(size_t(T) * half), sin(size_t(T) * half);
    for (int r = 0; r < T; ++r)
      for (int i = 0; i < half; ++i) {
        float a = float(pos_of[size_t(r)]) * std::pow(10000.0f, -2.0f * i / hd);
        cos[size_t(r) * half + i] = std::cos(a);
        sin[size_t(r) * half + i] = std::sin(a);
      }
    const size_t slots = size_t(pages_total) * P;
    k::PagedKv kv{gpu.poisoned<uint16_t>(slots * KV), gpu.poisoned<uint16_t>(slots * KV), gpu.upload(slot),
                  gpu.upload(keys), gpu.upload(table_at), gpu.upload(pages), P};
    k::HeadShape shape{nh, nkv, hd};
    float* q = gpu.poisoned<float>(size_t(T) * Q);
    uint16_t* out = gpu.poisoned<uint16_t>(size_t(T) * Q);
    const float scale = 1.0f / std::sqrt(float(hd));
    k::qkv_rope_store(gpu.upload(qkv), T, shape, cs.norm ? gpu.upload(qn) : nullptr,
                      cs.norm ? gpu.upload(kn) : nullptr, 1e-6f, gpu.upload(cos), gpu.upload(sin), kv, q, gpu.stream());
    k::attention(q, T, shape, kv, scale, out, gpu.stream());

    // CPU: split, norm, rope, bf16 K/V, softmax attention in double.
    std::vector<float> cq(size_t(T) * Q), ck(size_t(T) * KV), cv(size_t(T) * KV);
    for (int r = 0; r < T; ++r) {
      const float* row = qkv.data() + size_t(r) * W;
      std::copy_n(row, Q, cq.data() + size_t(r) * Q);
      std::copy_n(row + Q, KV, ck.data() + size_t(r) * KV);
      std::copy_n(row + Q + KV, KV, cv.data() + size_t(r) * KV);
    }
    if (cs.norm) {
      cpu::rmsnorm(cq.data(), qn.data(), T * nh, hd, 1e-6f, cq.data());
      cpu::rmsnorm(ck.data(), kn.data(), T * nkv, hd, 1e-6f, ck.data());
    }
    cpu::rope(cq.data(), T, nh, hd, cos.data(), sin.data());
    cpu::rope(ck.data(), T, nkv, hd, cos.data(), sin.data());
    EXPECT_LE(rel_l2(gpu.download(q, cq.size()), cq), 1e-5);
    auto kb = from_bf16(to_bf16(ck)), vb = from_bf16(to_bf16(cv));
    auto kdev = from_bf16(gpu.download(kv.keys, slots * KV)), vdev = from_bf16(gpu.download(kv.values, slots * KV));
    for (int r = 0; r < T; ++r)
      for (int i = 0; i < KV; ++i) {
        // Keys went through fp32 arithmetic in another order first: allow one bf16 step.
        const float want_key = kb[size_t(r) * KV + i];
        ASSERT_LE(std::fabs(kdev[size_t(slot[size_t(r)]) * KV + i] - want_key), std::fabs(want_key) / 128 + 1e-30f)
            << "key row " << r;
        ASSERT_EQ(vdev[size_t(slot[size_t(r)]) * KV + i], vb[size_t(r) * KV + i]) << "value row " << r;
      }
    std::vector<float> want(size_t(T) * Q);
    for (int r = 0; r < T; ++r) {
      const int first = r - pos_of[size_t(r)];  // rows of one stream are consecutive
      for (int h = 0; h < nh; ++h) {
        const int g = h / (nh / nkv);
        std::vector<double> s(size_t(keys[size_t(r)]));
        double mx = -1e300, sum = 0;
        for (int j = 0; j < keys[size_t(r)]; ++j) {
          double d = 0;
          for (int e = 0; e < hd; ++e)
            d += double(cq[(size_t(r) * nh + h) * hd + e]) * kb[size_t(first + j) * KV + size_t(g) * hd + e];
          s[size_t(j)] = d * scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        for (auto& v : s) sum += (v = std::exp(v - mx));
        for (int e = 0; e < hd; ++e) {
          double o = 0;
          for (int j = 0; j < keys[size_t(r)]; ++j) o += s[size_t(j)] / sum * vb[size_t(first + j) * KV + size_t(g) * hd + e];
          want[(size_t(r) * nh + h) * hd + e] = float(o);
        }
      }
    }
    EXPECT_LE(rel_l2(from_bf16(gpu.download(out, want.size())), want), 5e-3);
  }
}

}  // namespace
}  // namespace fs::test

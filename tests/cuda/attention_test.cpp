// q/k norm + RoPE + paged KV store, and causal GQA attention over pages, against plain CPU loops; attention's row
// bits across calls of different makeup.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

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
    k::attention(q, T, shape, kv, scale, nullptr, {}, out, gpu.stream());

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
        std::vector<double> s(static_cast<size_t>(keys[size_t(r)]));
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
          for (int j = 0; j < keys[size_t(r)]; ++j)
            o += s[size_t(j)] / sum * vb[size_t(first + j) * KV + size_t(g) * hd + e];
          want[(size_t(r) * nh + h) * hd + e] = float(o);
        }
      }
    }
    EXPECT_LE(rel_l2(from_bf16(gpu.download(out, want.size())), want), 5e-3);
  }
}

// Sequences on scattered pages of a pool with random bf16 keys and values (unused slots hold NaN, so a kernel that
// reads past a row's keys without masking shows), and random q for every (sequence, position).
struct PagedPool {
  int page_tokens = 16, heads, kv_heads, head_dim;
  std::vector<std::vector<int32_t>> tables;  // page ids of each sequence
  std::vector<uint16_t> keys, values;        // [slots, kv_heads·head_dim]
  std::vector<std::vector<float>> q;         // per sequence: [length, heads·head_dim]
  std::vector<std::vector<float>> gate;      // per sequence: the output gate, q's layout

  PagedPool(std::mt19937& rng, int nh, int nkv, int hd, const std::vector<int>& lengths)
      : heads(nh), kv_heads(nkv), head_dim(hd) {
    int total = 0;
    for (int n : lengths) total += (n + page_tokens - 1) / page_tokens;
    std::vector<int32_t> ids(static_cast<size_t>(total) + 7);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
    std::shuffle(ids.begin(), ids.end(), rng);
    const size_t width = size_t(nkv) * hd;
    keys.assign(ids.size() * page_tokens * width, 0xffff);
    values = keys;
    size_t next = 0;
    for (int n : lengths) {
      const size_t used = size_t(n + page_tokens - 1) / size_t(page_tokens);
      std::vector<int32_t> table(ids.begin() + long(next), ids.begin() + long(next + used));
      next += used;
      for (int pos = 0; pos < n; ++pos) {
        const size_t at = slot(table, pos) * width;
        auto k = to_bf16(random_floats(rng, width)), v = to_bf16(random_floats(rng, width));
        std::copy(k.begin(), k.end(), keys.begin() + long(at));
        std::copy(v.begin(), v.end(), values.begin() + long(at));
      }
      tables.push_back(table);
      q.push_back(random_floats(rng, size_t(n) * nh * hd));
      gate.push_back(random_floats(rng, size_t(n) * nh * hd, 3.0f));
    }
  }
  size_t slot(const std::vector<int32_t>& table, int pos) const {
    return size_t(table[size_t(pos / page_tokens)]) * page_tokens + size_t(pos % page_tokens);
  }
  size_t row_width() const { return size_t(heads) * head_dim; }
};

struct Row {
  int seq, pos;
};

// Uploads the pool once; `run` attends the given rows in one call and returns the bf16 output rows.
class PagedAttention {
 public:
  PagedAttention(Gpu& gpu, const PagedPool& pool)
      : gpu_(gpu), pool_(pool), keys_(gpu.upload(pool.keys)), values_(gpu.upload(pool.values)) {}

  // `lone`: the leading rows attention runs one per CTA in a call of over 64 rows.
  std::vector<uint16_t> run(const std::vector<Row>& rows, bool plain = false, bool gated = false,
                            const k::AttentionSplit& split = {}, int lone = 0) {
    std::vector<int32_t> row_keys, row_table, pages;
    std::vector<float> q, gate;
    std::vector<int> table_of(pool_.tables.size(), -1);
    for (const Row& r : rows) {
      if (table_of[size_t(r.seq)] < 0) {
        table_of[size_t(r.seq)] = int(pages.size());
        pages.insert(pages.end(), pool_.tables[size_t(r.seq)].begin(), pool_.tables[size_t(r.seq)].end());
      }
      row_keys.push_back(r.pos + 1);
      row_table.push_back(table_of[size_t(r.seq)]);
      const float* src = pool_.q[size_t(r.seq)].data() + size_t(r.pos) * pool_.row_width();
      q.insert(q.end(), src, src + pool_.row_width());
      const float* g = pool_.gate[size_t(r.seq)].data() + size_t(r.pos) * pool_.row_width();
      gate.insert(gate.end(), g, g + pool_.row_width());
    }
    const float* gate_d = gated ? gpu_.upload(gate) : nullptr;
    std::vector<int32_t> no_slots(rows.size(), -1);
    k::PagedKv kv{keys_, values_, gpu_.upload(no_slots), gpu_.upload(row_keys), gpu_.upload(row_table),
                  gpu_.upload(pages), pool_.page_tokens};
    k::HeadShape shape{pool_.heads, pool_.kv_heads, pool_.head_dim};
    uint16_t* out = gpu_.poisoned<uint16_t>(rows.size() * pool_.row_width());
    const float scale = 1.0f / std::sqrt(float(pool_.head_dim));
    if (plain)
      k::plain_attention(gpu_.upload(q), int(rows.size()), shape, kv, scale, gate_d, out, gpu_.stream());
    else
      k::attention(gpu_.upload(q), int(rows.size()), shape, kv, scale, gate_d, split, out, gpu_.stream(), lone);
    return gpu_.download(out, rows.size() * pool_.row_width());
  }

 private:
  Gpu& gpu_;
  const PagedPool& pool_;
  uint16_t* keys_;
  uint16_t* values_;
};

// Softmax attention of one row in double, q rounded to bf16 as the tensor-core kernel does, times sigmoid(gate) when
// gated.
std::vector<float> cpu_attention(const PagedPool& pool, Row r, bool round_q, bool gated) {
  const int hd = pool.head_dim, nh = pool.heads, group = pool.heads / pool.kv_heads;
  const size_t width = size_t(pool.kv_heads) * hd;
  const auto& table = pool.tables[size_t(r.seq)];
  std::vector<float> out(pool.row_width());
  for (int h = 0; h < nh; ++h) {
    const size_t kv_at = size_t(h / group) * hd;
    std::vector<double> qd(static_cast<size_t>(hd)), s(static_cast<size_t>(r.pos) + 1), o(static_cast<size_t>(hd), 0.0);
    for (int d = 0; d < hd; ++d) {
      const float x = pool.q[size_t(r.seq)][(size_t(r.pos) * nh + h) * hd + d];
      qd[size_t(d)] = round_q ? bf16_to_f32(f32_to_bf16(x)) : x;
    }
    double mx = -1e300, sum = 0;
    for (int j = 0; j <= r.pos; ++j) {
      const uint16_t* kj = pool.keys.data() + pool.slot(table, j) * width + kv_at;
      double dot = 0;
      for (int d = 0; d < hd; ++d) dot += qd[size_t(d)] * bf16_to_f32(kj[d]);
      s[size_t(j)] = dot / std::sqrt(double(hd));
      mx = std::max(mx, s[size_t(j)]);
    }
    for (auto& v : s) sum += (v = std::exp(v - mx));
    for (int j = 0; j <= r.pos; ++j) {
      const uint16_t* vj = pool.values.data() + pool.slot(table, j) * width + kv_at;
      for (int d = 0; d < hd; ++d) o[size_t(d)] += s[size_t(j)] / sum * bf16_to_f32(vj[d]);
    }
    for (int d = 0; d < hd; ++d) {
      const size_t at = size_t(h) * hd + size_t(d);
      const double g = pool.gate[size_t(r.seq)][size_t(r.pos) * pool.row_width() + at];
      out[at] = float(gated ? o[size_t(d)] / (1.0 + std::exp(-g)) : o[size_t(d)]);
    }
  }
  return out;
}

// Each output row within tolerance of the double reference, and all rows together tighter.
void expect_matches_cpu(const PagedPool& pool, const std::vector<Row>& rows, const std::vector<uint16_t>& got,
                        bool round_q, bool gated = false) {
  const size_t W = pool.row_width();
  std::vector<float> all_got, all_want;
  for (size_t i = 0; i < rows.size(); ++i) {
    auto want = cpu_attention(pool, rows[i], round_q, gated);
    std::vector<uint16_t> bits(got.begin() + long(i * W), got.begin() + long((i + 1) * W));
    auto have = from_bf16(bits);
    EXPECT_LE(rel_l2(have, want), 1.5e-2) << "row " << i << " (sequence " << rows[i].seq << ", position "
                                          << rows[i].pos << ")";
    all_got.insert(all_got.end(), have.begin(), have.end());
    all_want.insert(all_want.end(), want.begin(), want.end());
  }
  EXPECT_LE(rel_l2(all_got, all_want), 5e-3);
}

// Sequences of the tests: a 300-token prompt (key counts 1…300), and others around the 64-key block edges.
const std::vector<int> kLengths = {300, 130, 64, 65, 1, 200, 129};

// One call mixing decode rows of several sequences with the whole 300-row prompt and an 80-row chunk.
std::vector<Row> mixed_rows() {
  std::vector<Row> rows = {{1, 129}};
  for (int p = 0; p < 300; ++p) rows.push_back({0, p});
  rows.push_back({2, 63});
  for (int p = 120; p < 200; ++p) rows.push_back({5, p});
  rows.push_back({3, 64});
  rows.push_back({4, 0});
  rows.push_back({6, 128});
  return rows;
}

// At most 64 rows (the one-row-per-tile launch): decode rows of every sequence and a short chunk.
std::vector<Row> decode_rows() {
  std::vector<Row> rows = {{0, 299}, {1, 129}, {2, 63}, {3, 64}, {4, 0}, {5, 199}, {6, 128}, {0, 0}, {0, 64}};
  for (int p = 40; p < 70; ++p) rows.push_back({5, p});
  return rows;
}

struct Heads {
  int heads, kv_heads, head_dim;
};

std::string describe(Heads s) {
  return "heads " + std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + " hd " + std::to_string(s.head_dim);
}

TEST(CudaKernels, TensorCoreAttentionMatchesCpu) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(11);
  std::vector<Heads> shapes;
  for (int hd : {16, 32, 64, 128})
    for (int group : {1, 2, 4, 8}) shapes.push_back({2 * group, 2, hd});
  // A group of 3 (5 rows × 3 heads per tile), head_dim 256 and 48, a group wider than one tile (32 heads on 1).
  for (Heads s : {Heads{3, 1, 48}, Heads{8, 2, 256}, Heads{32, 1, 64}, Heads{12, 4, 96}}) shapes.push_back(s);
  for (Heads s : shapes) {
    SCOPED_TRACE(describe(s));
    PagedPool pool(rng, s.heads, s.kv_heads, s.head_dim, kLengths);
    PagedAttention att(gpu, pool);
    for (const auto& rows : {mixed_rows(), decode_rows()}) expect_matches_cpu(pool, rows, att.run(rows), true);
  }
}

TEST(CudaKernels, PlainAttentionMatchesCpuForOtherHeadDims) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(12);
  for (Heads s : {Heads{4, 2, 24}, Heads{8, 2, 40}, Heads{6, 2, 64}}) {
    SCOPED_TRACE(describe(s));
    PagedPool pool(rng, s.heads, s.kv_heads, s.head_dim, kLengths);
    PagedAttention att(gpu, pool);
    const bool plain = s.head_dim % 16 == 0;  // head dims off the tensor-core path go there by themselves
    expect_matches_cpu(pool, decode_rows(), att.run(decode_rows(), plain), false);
  }
}

// With Qwen3.5's output gate, on the tensor-core and the plain kernel.
TEST(CudaKernels, GatedAttentionMatchesCpu) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(14);
  for (Heads s : {Heads{4, 2, 32}, Heads{8, 2, 256}, Heads{6, 2, 64}, Heads{4, 2, 24}}) {
    SCOPED_TRACE(describe(s));
    PagedPool pool(rng, s.heads, s.kv_heads, s.head_dim, kLengths);
    PagedAttention att(gpu, pool);
    const bool tensor_cores = s.head_dim % 16 == 0;
    for (const auto& rows : {mixed_rows(), decode_rows()})
      expect_matches_cpu(pool, rows, att.run(rows, false, true), tensor_cores, true);
    expect_matches_cpu(pool, decode_rows(), att.run(decode_rows(), true, true), false, true);
  }
}

// A row's bits are the same alone, inside the whole prompt, inside a mixed call and inside a small call. Alone, a
// row's CTAs take the deep pipeline of calls with few CTAs; the 39-row decode call takes three stages for most head
// shapes here.
TEST(CudaKernels, AttentionRowBitsDoNotDependOnTheCall) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(13);
  for (Heads s : {Heads{8, 2, 128}, Heads{4, 4, 64}, Heads{16, 2, 64}, Heads{4, 2, 16}, Heads{3, 1, 48},
                  Heads{32, 8, 128}}) {
    SCOPED_TRACE(describe(s));
    PagedPool pool(rng, s.heads, s.kv_heads, s.head_dim, kLengths);
    PagedAttention att(gpu, pool);
    const size_t W = pool.row_width();
    // Reference bits: each row of interest computed alone.
    std::map<std::pair<int, int>, std::vector<uint16_t>> alone;
    auto check = [&](const std::vector<Row>& rows, const std::vector<uint16_t>& got, const char* call) {
      int compared = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        auto it = alone.find({rows[i].seq, rows[i].pos});
        if (it == alone.end()) continue;
        ++compared;
        ASSERT_TRUE(std::equal(it->second.begin(), it->second.end(), got.begin() + long(i * W)))
            << call << ": row " << i << " (sequence " << rows[i].seq << ", position " << rows[i].pos
            << ") differs from the row computed alone";
      }
      EXPECT_GT(compared, 3) << call;
    };
    std::vector<Row> singles = {{0, 0},  {0, 1},   {0, 15},  {0, 16},  {0, 17},  {0, 63}, {0, 64}, {0, 65},
                                {0, 127}, {0, 128}, {0, 200}, {0, 299}, {1, 129}, {2, 63}, {3, 64}, {4, 0},
                                {5, 150}, {5, 199}, {6, 128}, {5, 45}};
    for (Row r : singles) alone[{r.seq, r.pos}] = att.run({r});
    std::vector<Row> prompt;
    for (int p = 0; p < 300; ++p) prompt.push_back({0, p});
    check(prompt, att.run(prompt), "whole prompt");
    check(mixed_rows(), att.run(mixed_rows()), "mixed call");
    check(decode_rows(), att.run(decode_rows()), "decode call");
    // The prompt shifted by one row, so every tile straddles a different pair of rows.
    std::vector<Row> shifted = {{4, 0}};
    shifted.insert(shifted.end(), prompt.begin(), prompt.end());
    check(shifted, att.run(shifted), "shifted prompt");
    // Decode rows ahead of prompt rows, run one per CTA: 6 of them, then 70 (two launches of row CTAs).
    std::vector<Row> lone = {{1, 129}, {2, 63}, {3, 64}, {4, 0}, {6, 128}, {5, 45}};
    std::vector<Row> lone_first = lone;
    lone_first.insert(lone_first.end(), prompt.begin(), prompt.end());
    for (int p = 150; p < 200; ++p) lone_first.push_back({5, p});
    check(lone_first, att.run(lone_first, false, false, {}, int(lone.size())), "6 lone rows, then prompts");
    std::vector<Row> many_lone;
    while (many_lone.size() < 70) many_lone.push_back(singles[many_lone.size() % singles.size()]);
    many_lone.insert(many_lone.end(), prompt.begin(), prompt.end());
    check(many_lone, att.run(many_lone, false, false, {}, 70), "70 lone rows, then a prompt");
  }
}

// Rows longer than one chunk of keys (kSplitKeys): against the double reference, and the same bits whether their
// chunks run in one CTA (a prefill call, a decode call without split scratch, or with too few records) or on
// several CTAs, alone or beside other rows, through the deep pipeline of few-CTA calls or the three-stage one of a
// 42-row call; the arrival counters are back at zero after every call.
TEST(CudaKernels, LongRowsGiveTheSameBitsSplitOrNot) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(15);
  const int long_len = 2 * k::kSplitKeys + 500;
  const std::vector<int> lengths = {long_len, k::kSplitKeys + 300, k::kSplitKeys + 1, k::kSplitKeys, 300};
  for (Heads s : {Heads{8, 2, 128}, Heads{6, 2, 64}, Heads{24, 4, 256}}) {
    SCOPED_TRACE(describe(s));
    PagedPool pool(rng, s.heads, s.kv_heads, s.head_dim, lengths);
    PagedAttention att(gpu, pool);
    const size_t W = pool.row_width();
    const size_t record = k::attention_record_floats(k::HeadShape{s.heads, s.kv_heads, s.head_dim});
    auto split_with = [&](int capacity) {
      k::AttentionSplit split;
      split.records = gpu.poisoned<float>(size_t(capacity) * record);
      split.record_capacity = capacity;
      split.counters = gpu.upload(std::vector<int32_t>(size_t(64) * s.heads, 0));
      return split;
    };
    const k::AttentionSplit roomy = split_with(64), tight = split_with(4);
    const std::vector<Row> decode = {{0, long_len - 1}, {1, k::kSplitKeys + 299}, {2, k::kSplitKeys},
                                     {3, k::kSplitKeys - 1}, {4, 299}, {0, k::kSplitKeys + 7}};
    // Every row alone, chunks split over CTAs: the reference bits, within tolerance of the double loop.
    std::vector<std::vector<uint16_t>> alone;
    for (Row r : decode) alone.push_back(att.run({r}, false, false, roomy));
    std::vector<uint16_t> all;
    for (const auto& a : alone) all.insert(all.end(), a.begin(), a.end());
    expect_matches_cpu(pool, decode, all, true);
    auto expect_alone_bits = [&](const std::vector<Row>& rows, const std::vector<uint16_t>& got, const char* call) {
      int compared = 0;
      for (size_t i = 0; i < rows.size(); ++i)
        for (size_t j = 0; j < decode.size(); ++j)
          if (rows[i].seq == decode[j].seq && rows[i].pos == decode[j].pos) {
            ++compared;
            EXPECT_TRUE(std::equal(alone[j].begin(), alone[j].end(), got.begin() + long(i * W)))
                << call << ": sequence " << rows[i].seq << ", position " << rows[i].pos;
          }
      EXPECT_GT(compared, 0) << call;
    };
    for (size_t j = 0; j < decode.size(); ++j)
      expect_alone_bits({decode[j]}, att.run({decode[j]}), "alone, no split scratch");
    expect_alone_bits(decode, att.run(decode, false, false, roomy), "decode call, split");
    expect_alone_bits(decode, att.run(decode, false, false, tight), "decode call, too few records for some rows");
    expect_alone_bits(decode, att.run(decode), "decode call, no split scratch");
    std::vector<Row> many;  // enough rows × kv heads that the call takes three stages
    while (many.size() < 42) many.insert(many.end(), decode.begin(), decode.end());
    expect_alone_bits(many, att.run(many, false, false, roomy), "42-row decode call, split where records fit");
    std::vector<Row> prompt;  // the long sequence's whole prompt: tiles of consecutive rows, chunks in one CTA
    for (int p = 0; p < long_len; ++p) prompt.push_back({0, p});
    prompt.push_back({2, k::kSplitKeys});
    expect_alone_bits(prompt, att.run(prompt, false, false, roomy), "whole prompt");
    // 70 long rows one per CTA ahead of a prompt (two launches of row CTAs, chunks split over workers), then the
    // prompt's tiles.
    std::vector<Row> lone_first(many.begin(), many.end());
    while (lone_first.size() < 70) lone_first.push_back(decode[lone_first.size() % decode.size()]);
    for (int p = 0; p < 300; ++p) lone_first.push_back({4, p});
    expect_alone_bits(lone_first, att.run(lone_first, false, false, roomy, 70), "70 lone rows, then a prompt");
    for (const auto& split : {roomy, tight})
      EXPECT_EQ(gpu.download(split.counters, size_t(64) * s.heads), std::vector<int32_t>(size_t(64) * s.heads, 0));
  }
}

}  // namespace
}  // namespace fs::test

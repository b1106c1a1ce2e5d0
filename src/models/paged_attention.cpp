#include "models/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/exp8.h"
#include "backends/cpu/ops.h"
#include "core/thread_pool.h"
#include "models/kv_pool.h"

namespace fs {

void store_paged_kv(const AttentionRows& rows, int layer, const float* k, const float* v, KvPool& pool) {
  const int row = pool.row_floats(), P = pool.page_tokens();
  for (size_t t = 0; t < rows.positions.size(); ++t) {
    const int pos = rows.positions[t];
    const int32_t page = rows.chunks[size_t(rows.chunk_of[t])].pages[size_t(pos / P)];
    std::copy_n(k + t * size_t(row), row, pool.keys(page, layer) + size_t(pos % P) * row);
    std::copy_n(v + t * size_t(row), row, pool.values(page, layer) + size_t(pos % P) * row);
  }
}

namespace {

// Each row's attended slots past its committed ones: for a tree row, its ancestors' slots then its own, root first;
// empty for a chain row, which attends to slots 0..pos.
std::vector<std::vector<int>> tree_paths(const AttentionRows& rows) {
  std::vector<std::vector<int>> paths(rows.positions.size());
  int chunk = -1;
  size_t first = 0;
  for (size_t t = 0; t < rows.positions.size(); ++t) {
    if (rows.chunk_of[t] != chunk) chunk = rows.chunk_of[t], first = t;
    const SequenceChunk& ch = rows.chunks[size_t(chunk)];
    if (ch.row_parents.empty()) continue;
    for (int32_t r = int32_t(t - first); r >= 0; r = ch.row_parents[size_t(r)]) paths[t].push_back(ch.start_pos + r);
    std::reverse(paths[t].begin(), paths[t].end());
  }
  return paths;
}

// hsum8 of 4 vectors at once, the same adds on the same lanes: result lanes 0, 4, 1, 5 are hsum8(v0..v3).
inline __m256 hsum8x4(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
  const __m256 s0 = _mm256_add_ps(_mm256_permute2f128_ps(v0, v1, 0x20), _mm256_permute2f128_ps(v0, v1, 0x31));
  const __m256 s1 = _mm256_add_ps(_mm256_permute2f128_ps(v2, v3, 0x20), _mm256_permute2f128_ps(v2, v3, 0x31));
  // s0: low 128 = v0 lanes i + (i+4), high 128 = v1's; s1 the same for v2, v3.
  const __m256 w = _mm256_add_ps(_mm256_shuffle_ps(s0, s1, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(s0, s1, _MM_SHUFFLE(3, 2, 3, 2)));
  // w: [v0 (0+2), v0 (1+3), v2 .., v2 .. | v1 .., v1 .., v3 .., v3 ..]
  return _mm256_add_ps(_mm256_shuffle_ps(w, w, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(w, w, _MM_SHUFFLE(3, 1, 3, 1)));
}

// The query heads of one K/V head that read the same keys (at most kHeadsAtOnce at a time).
constexpr int kHeadsAtOnce = 3;

// scores[q][j] = dot(qs[q], keys[j]) · scale for Q heads, KB keys at a time, each key loaded once for all heads (Q · KB
// sums, the keys and a query fit the 16 registers): each key's sums in cpu::dot's order.
template <int Q, int KB = (Q == 3 ? 2 : 4)>
void key_scores(const float* const* qs, const float* const* keys, int n, int hd, float scale, float* const* scores) {
  const int body = hd / 8 * 8;
  constexpr int kSums = Q * KB, kGroups = (kSums + 3) / 4;
  int j = 0;
  for (; j + KB <= n; j += KB) {
    __m256 acc[kGroups * 4];  // sum q · KB + u: head q, key j + u; the rest stay zero
    for (int a = 0; a < kGroups * 4; ++a) acc[a] = _mm256_setzero_ps();
    for (int i = 0; i < body; i += 8) {
      __m256 kv[KB];
      for (int u = 0; u < KB; ++u) kv[u] = _mm256_loadu_ps(keys[j + u] + i);
      for (int q = 0; q < Q; ++q) {
        const __m256 qv = _mm256_loadu_ps(qs[q] + i);
        for (int u = 0; u < KB; ++u) acc[q * KB + u] = _mm256_fmadd_ps(qv, kv[u], acc[q * KB + u]);
      }
    }
    alignas(32) float d[kGroups * 4];
    for (int g = 0; g < kGroups; ++g) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, hsum8x4(acc[4 * g], acc[4 * g + 1], acc[4 * g + 2], acc[4 * g + 3]));
      d[4 * g] = lanes[0], d[4 * g + 1] = lanes[4], d[4 * g + 2] = lanes[1], d[4 * g + 3] = lanes[5];
    }
    for (int q = 0; q < Q; ++q)
      for (int u = 0; u < KB; ++u) {
        float x = d[q * KB + u];
        for (int i = body; i < hd; ++i) x = std::fma(qs[q][i], keys[j + u][i], x);
        scores[q][j + u] = x * scale;
      }
  }
  for (; j < n; ++j)
    for (int q = 0; q < Q; ++q) scores[q][j] = cpu::dot(qs[q], keys[j], hd) * scale;
}

// Each head's scores → exp(score - max) / sum, each sum in key order.
template <int Q>
void softmax_in_place(float* const* scores, int n) {
  float sum[Q];
  for (int q = 0; q < Q; ++q) {
    float* s = scores[q];
    // The largest score (NaNs skipped, as std::max does); a tie of -0 and +0 gives either, whose exps are equal.
    __m256 m8 = _mm256_set1_ps(-INFINITY);
    int j = 0;
    for (; j + 8 <= n; j += 8) m8 = _mm256_max_ps(_mm256_loadu_ps(s + j), m8);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, m8);
    float mx = -INFINITY;
    for (float v : lanes) mx = std::max(mx, v);
    for (; j < n; ++j) mx = std::max(mx, s[j]);
    const __m256 mxv = _mm256_set1_ps(mx);
    for (j = 0; j + 8 <= n; j += 8) _mm256_storeu_ps(s + j, cpu::exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mxv)));
    for (; j < n; ++j) s[j] = std::exp(s[j] - mx);
    sum[q] = 0;
  }
  for (int j = 0; j < n; ++j)
    for (int q = 0; q < Q; ++q) sum[q] += scores[q][j];
  for (int q = 0; q < Q; ++q)
    for (int j = 0; j < n; ++j) scores[q][j] = scores[q][j] / sum[q];
}

// out[q] = Σ_j p[q][j] · values[j] for Q heads, each dim's fused adds in key order (cpu::axpy's), 32 dims of every
// head in registers, each value loaded once for all heads.
template <int Q>
void weighted_values(const float* const* p, const float* const* values, int n, int hd, float* const* out) {
  const int body = hd / 8 * 8;
  int i = 0;
  for (; i + 32 <= body; i += 32) {
    __m256 acc[Q][4];
    for (int q = 0; q < Q; ++q)
      for (int u = 0; u < 4; ++u) acc[q][u] = _mm256_setzero_ps();
    for (int j = 0; j < n; ++j) {
      __m256 pv[Q];
      for (int q = 0; q < Q; ++q) pv[q] = _mm256_set1_ps(p[q][j]);
      for (int u = 0; u < 4; ++u) {
        const __m256 vv = _mm256_loadu_ps(values[j] + i + 8 * u);
        for (int q = 0; q < Q; ++q) acc[q][u] = _mm256_fmadd_ps(pv[q], vv, acc[q][u]);
      }
    }
    for (int q = 0; q < Q; ++q)
      for (int u = 0; u < 4; ++u) _mm256_storeu_ps(out[q] + i + 8 * u, acc[q][u]);
  }
  for (; i < hd; ++i)  // dims past the blocks of 32: the same fused adds one dim at a time
    for (int q = 0; q < Q; ++q) {
      float x = 0.0f;
      for (int j = 0; j < n; ++j) x = std::fma(p[q][j], values[j][i], x);
      out[q][i] = x;
    }
}

// Q heads that read the same keys and values.
template <int Q>
void attend(const float* const* qs, const float* const* kp, const float* const* vp, int n, int hd, float scale,
            float* const* scores, float* const* out) {
  key_scores<Q>(qs, kp, n, hd, scale, scores);
  softmax_in_place<Q>(scores, n);
  weighted_values<Q>(scores, vp, n, hd, out);
}

}  // namespace

void paged_attention(const AttentionRows& rows, const AttentionHeads& s, KvPool& pool, int layer, const float* q,
                     float* out) {
  const int hd = s.head_dim, nh = s.heads, group = s.heads / s.kv_heads;
  const int row = pool.row_floats(), P = pool.page_tokens();
  const float scale = 1.0f / std::sqrt(float(hd));
  const std::vector<std::vector<int>> paths = tree_paths(rows);
  ThreadPool::global().parallel_for(rows.positions.size() * size_t(nh), [&](size_t begin, size_t end) {
    std::vector<float> scores;
    std::vector<const float*> kp, vp;
    // Items in runs of heads of one row and one K/V head, which read the same keys.
    for (size_t item = begin; item < end;) {
      const size_t t = item / size_t(nh);
      const int h0 = int(item % size_t(nh)), g = h0 / group;
      const int heads = int(std::min<size_t>(end - item, size_t((g + 1) * group - h0)));
      const SequenceChunk& ch = rows.chunks[size_t(rows.chunk_of[t])];
      const auto& pages = ch.pages;
      // Keys 0..committed-1 are the slots themselves, then the row's path: the same keys in the same order as the
      // chain row at that depth reads.
      const std::vector<int>& path = paths[t];
      const int committed = path.empty() ? rows.positions[t] + 1 : ch.start_pos;
      const int n = committed + int(path.size());
      kp.resize(size_t(n));
      vp.resize(size_t(n));
      const size_t head_offset = size_t(g) * hd;
      for (int first = 0; first < committed; first += P) {
        const int32_t page = pages[size_t(first / P)];
        const float* keys = pool.keys(page, layer) + head_offset;
        const float* values = pool.values(page, layer) + head_offset;
        for (int o = 0, count = std::min(P, committed - first); o < count; ++o) {
          kp[size_t(first + o)] = keys + size_t(o) * row;
          vp[size_t(first + o)] = values + size_t(o) * row;
        }
      }
      for (size_t e = 0; e < path.size(); ++e) {
        const int k = path[e];
        kp[size_t(committed) + e] = pool.keys(pages[size_t(k / P)], layer) + size_t(k % P) * row + head_offset;
        vp[size_t(committed) + e] = pool.values(pages[size_t(k / P)], layer) + size_t(k % P) * row + head_offset;
      }
      scores.resize(size_t(kHeadsAtOnce) * size_t(n));
      for (int h = h0; h < h0 + heads; h += kHeadsAtOnce) {
        const int count = std::min(kHeadsAtOnce, h0 + heads - h);
        const float* qs[kHeadsAtOnce];
        float* sc[kHeadsAtOnce];
        float* os[kHeadsAtOnce];
        for (int c = 0; c < count; ++c) {
          qs[c] = q + (t * size_t(nh) + size_t(h + c)) * size_t(hd);
          sc[c] = scores.data() + size_t(c) * size_t(n);
          os[c] = out + (t * size_t(nh) + size_t(h + c)) * size_t(hd);
        }
        if (count == 3) attend<3>(qs, kp.data(), vp.data(), n, hd, scale, sc, os);
        else if (count == 2) attend<2>(qs, kp.data(), vp.data(), n, hd, scale, sc, os);
        else attend<1>(qs, kp.data(), vp.data(), n, hd, scale, sc, os);
      }
      item += size_t(heads);
    }
  });
}

void move_paged_kv(KvPool& pool, std::span<const int32_t> pages, int from, int to) {
  const int row = pool.row_floats(), P = pool.page_tokens();
  const int32_t pf = pages[size_t(from / P)], pt = pages[size_t(to / P)];
  for (int layer = 0; layer < pool.layers(); ++layer) {
    std::copy_n(pool.keys(pf, layer) + size_t(from % P) * row, row, pool.keys(pt, layer) + size_t(to % P) * row);
    std::copy_n(pool.values(pf, layer) + size_t(from % P) * row, row, pool.values(pt, layer) + size_t(to % P) * row);
  }
}

}  // namespace fs

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

// hsum8 of 8 vectors at once, the same adds on the same lanes: result lane i is hsum8(v[i]).
inline __m256 hsum8x8(const __m256 (&v)[8]) {
  __m256 s[4];
  for (int p = 0; p < 4; ++p)
    s[p] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x20),
                         _mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x31));
  // s[p]: low 128 = v[2p] lanes i + (i+4), high 128 = v[2p+1]'s.
  const __m256 w0 = _mm256_add_ps(_mm256_shuffle_ps(s[0], s[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm256_shuffle_ps(s[0], s[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 w1 = _mm256_add_ps(_mm256_shuffle_ps(s[2], s[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm256_shuffle_ps(s[2], s[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // w0: [v0 (0+2), v0 (1+3), v2 .., v2 .. | v1 .., v1 .., v3 .., v3 ..], w1 the same for v4..v7.
  const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(w0, w1, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(w0, w1, _MM_SHUFFLE(3, 1, 3, 1)));
  // r: [v0, v2, v4, v6 | v1, v3, v5, v7]
  return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// scores[j] = dot(q, keys[j]) · scale, 8 keys at a time: each key's sums in cpu::dot's order.
void key_scores(const float* q, const float* const* keys, int n, int hd, float scale, float* scores) {
  const int body = hd / 8 * 8;
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 acc[8];
    for (int u = 0; u < 8; ++u) acc[u] = _mm256_setzero_ps();
    for (int i = 0; i < body; i += 8) {
      const __m256 qv = _mm256_loadu_ps(q + i);
      for (int u = 0; u < 8; ++u) acc[u] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(keys[j + u] + i), acc[u]);
    }
    alignas(32) float d[8];
    _mm256_store_ps(d, hsum8x8(acc));
    for (int u = 0; u < 8; ++u) {
      float x = d[u];
      for (int i = body; i < hd; ++i) x = std::fma(q[i], keys[j + u][i], x);
      scores[j + u] = x * scale;
    }
  }
  for (; j < n; ++j) scores[j] = cpu::dot(q, keys[j], hd) * scale;
}

// scores → exp(score - max) / sum, the sum in key order.
void softmax_in_place(float* scores, int n) {
  float mx = -INFINITY;
  for (int j = 0; j < n; ++j) mx = std::max(mx, scores[j]);
  const __m256 mxv = _mm256_set1_ps(mx);
  int j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(scores + j, cpu::exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + j), mxv)));
  for (; j < n; ++j) scores[j] = std::exp(scores[j] - mx);
  float sum = 0;
  for (j = 0; j < n; ++j) sum += scores[j];
  for (j = 0; j < n; ++j) scores[j] = scores[j] / sum;
}

// out = Σ_j p[j] · values[j], each dim's fused adds in key order (cpu::axpy's), 64 dims held in registers.
void weighted_values(const float* p, const float* const* values, int n, int hd, float* out) {
  const int body = hd / 8 * 8;
  int i = 0;
  for (; i + 64 <= body; i += 64) {
    __m256 acc[8];
    for (int u = 0; u < 8; ++u) acc[u] = _mm256_setzero_ps();
    for (int j = 0; j < n; ++j) {
      const __m256 pv = _mm256_set1_ps(p[j]);
      for (int u = 0; u < 8; ++u) acc[u] = _mm256_fmadd_ps(pv, _mm256_loadu_ps(values[j] + i + 8 * u), acc[u]);
    }
    for (int u = 0; u < 8; ++u) _mm256_storeu_ps(out + i + 8 * u, acc[u]);
  }
  for (; i < hd; ++i) {  // dims past the blocks of 64: the same fused adds one dim at a time
    float x = 0.0f;
    for (int j = 0; j < n; ++j) x = std::fma(p[j], values[j][i], x);
    out[i] = x;
  }
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
    for (size_t item = begin; item < end; ++item) {
      const size_t t = item / size_t(nh);
      const int h = int(item % size_t(nh)), g = h / group;
      const SequenceChunk& ch = rows.chunks[size_t(rows.chunk_of[t])];
      const auto& pages = ch.pages;
      const float* qh = q + (t * size_t(nh) + size_t(h)) * size_t(hd);
      // Key j's slot: j itself up to the committed positions, then the row's path: the same keys in the same order
      // as the chain row at that depth reads.
      const std::vector<int>& path = paths[t];
      const int committed = path.empty() ? rows.positions[t] + 1 : ch.start_pos;
      const int n = committed + int(path.size());
      auto slot = [&](int j) { return j < committed ? j : path[size_t(j - committed)]; };
      scores.resize(size_t(n));
      kp.resize(size_t(n));
      vp.resize(size_t(n));
      for (int j = 0; j < n; ++j) {
        const int k = slot(j);
        kp[size_t(j)] = pool.keys(pages[size_t(k / P)], layer) + size_t(k % P) * row + size_t(g) * hd;
        vp[size_t(j)] = pool.values(pages[size_t(k / P)], layer) + size_t(k % P) * row + size_t(g) * hd;
      }
      key_scores(qh, kp.data(), n, hd, scale, scores.data());
      softmax_in_place(scores.data(), n);
      weighted_values(scores.data(), vp.data(), n, hd, out + (t * size_t(nh) + size_t(h)) * size_t(hd));
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

#include "models/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

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

}  // namespace

void paged_attention(const AttentionRows& rows, const AttentionHeads& s, KvPool& pool, int layer, const float* q,
                     float* out) {
  const int hd = s.head_dim, nh = s.heads, group = s.heads / s.kv_heads;
  const int row = pool.row_floats(), P = pool.page_tokens();
  const float scale = 1.0f / std::sqrt(float(hd));
  const std::vector<std::vector<int>> paths = tree_paths(rows);
  ThreadPool::global().parallel_for(rows.positions.size() * size_t(nh), [&](size_t begin, size_t end) {
    std::vector<float> scores;
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
      float mx = -INFINITY;
      for (int j = 0; j < n; ++j) {
        const int k = slot(j);
        const float* kj = pool.keys(pages[size_t(k / P)], layer) + size_t(k % P) * row + size_t(g) * hd;
        scores[size_t(j)] = cpu::dot(qh, kj, hd) * scale;
        mx = std::max(mx, scores[size_t(j)]);
      }
      float sum = 0;
      for (int j = 0; j < n; ++j) sum += (scores[size_t(j)] = std::exp(scores[size_t(j)] - mx));
      float* o = out + (t * size_t(nh) + size_t(h)) * size_t(hd);
      std::fill_n(o, hd, 0.0f);
      for (int j = 0; j < n; ++j) {
        const int k = slot(j);
        const float* vj = pool.values(pages[size_t(k / P)], layer) + size_t(k % P) * row + size_t(g) * hd;
        cpu::axpy(scores[size_t(j)] / sum, vj, o, hd);
      }
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

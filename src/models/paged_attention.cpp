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

void paged_attention(const AttentionRows& rows, const AttentionHeads& s, KvPool& pool, int layer, const float* q,
                     float* out) {
  const int hd = s.head_dim, nh = s.heads, group = s.heads / s.kv_heads;
  const int row = pool.row_floats(), P = pool.page_tokens();
  const float scale = 1.0f / std::sqrt(float(hd));
  ThreadPool::global().parallel_for(rows.positions.size() * size_t(nh), [&](size_t begin, size_t end) {
    std::vector<float> scores;
    for (size_t item = begin; item < end; ++item) {
      const size_t t = item / size_t(nh);
      const int h = int(item % size_t(nh)), g = h / group;
      const auto& pages = rows.chunks[size_t(rows.chunk_of[t])].pages;
      const float* qh = q + (t * size_t(nh) + size_t(h)) * size_t(hd);
      const int n = rows.positions[t] + 1;
      scores.resize(size_t(n));
      float mx = -INFINITY;
      for (int j = 0; j < n; ++j) {
        const float* kj = pool.keys(pages[size_t(j / P)], layer) + size_t(j % P) * row + size_t(g) * hd;
        scores[size_t(j)] = cpu::dot(qh, kj, hd) * scale;
        mx = std::max(mx, scores[size_t(j)]);
      }
      float sum = 0;
      for (int j = 0; j < n; ++j) sum += (scores[size_t(j)] = std::exp(scores[size_t(j)] - mx));
      float* o = out + (t * size_t(nh) + size_t(h)) * size_t(hd);
      std::fill_n(o, hd, 0.0f);
      for (int j = 0; j < n; ++j) {
        const float* vj = pool.values(pages[size_t(j / P)], layer) + size_t(j % P) * row + size_t(g) * hd;
        cpu::axpy(scores[size_t(j)] / sum, vj, o, hd);
      }
    }
  });
}

}  // namespace fs

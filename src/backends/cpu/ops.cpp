#include "backends/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <immintrin.h>

#include "backends/cpu/exp8.h"
#include "backends/cpu/int8_rows.h"
#include "backends/cpu/matmul_kernels.h"
#include "core/thread_pool.h"

namespace fs::cpu {

// Multiply-adds below which a matmul runs on the calling thread: handing such work to the pool's (spinning) threads
// costs more than it saves.
constexpr size_t kSerialWork = 200000;

namespace {

// Columns [begin, end) of one matmul, its bias added.
void matmul_columns(const float* x, int rows, const WeightMatrix& w, const float* bias, size_t begin, size_t end,
                    float* y) {
  if (w.packed) matmul_range_avx512(x, rows, w, begin, end, y);
  else matmul_range_avx2(x, rows, w, begin, end, y);
  if (bias)
    for (int m = 0; m < rows; ++m)
      for (size_t n = begin; n < end; ++n) y[size_t(m) * size_t(w.rows) + n] += bias[n];
}

size_t panels(const WeightMatrix& w) { return (size_t(w.rows) + kPanelRows - 1) / kPanelRows; }

}  // namespace

void matmul(const float* x, int rows, const WeightMatrix& w, const float* bias, float* y) {
  if (w.int8) return matmul_int8(x, rows, *w.int8, bias, y);
  const size_t N = size_t(w.rows);
  auto body = [&](size_t begin, size_t end) { matmul_columns(x, rows, w, bias, begin, end, y); };
  size_t work = size_t(rows) * N * size_t(w.cols);
  if (work < kSerialWork) return body(0, N);
  if (!w.packed) return ThreadPool::global().parallel_for(N, body);
  // Whole panels to each thread.
  const size_t P = kPanelRows;
  ThreadPool::global().parallel_for(panels(w), [&](size_t begin, size_t end) {
    body(begin * P, std::min(N, end * P));
  });
}

void matmuls(const float* x, int rows, std::span<const MatmulOut> outs) {
  size_t work = 0, total = 0;
  bool packed = true;
  for (const MatmulOut& o : outs) {
    packed = packed && o.w->packed && !o.w->int8;
    work += size_t(rows) * size_t(o.w->rows) * size_t(o.w->cols);
    total += panels(*o.w);
  }
  if (!packed) {
    for (const MatmulOut& o : outs) matmul(x, rows, *o.w, o.bias, o.y);
    return;
  }
  // Panels [begin, end) of all matrices laid end to end, each matrix's share through its own columns.
  auto body = [&](size_t begin, size_t end) {
    size_t first = 0;
    for (const MatmulOut& o : outs) {
      const size_t count = panels(*o.w), b = std::max(begin, first), e = std::min(end, first + count);
      if (b < e) {
        const size_t N = size_t(o.w->rows);
        matmul_columns(x, rows, *o.w, o.bias, (b - first) * kPanelRows, std::min(N, (e - first) * kPanelRows), o.y);
      }
      first += count;
    }
  };
  if (work < kSerialWork) return body(0, total);
  ThreadPool::global().parallel_for(total, body);
}

void rmsnorm(const float* x, const float* weight, int rows, int dim, float eps, float* y) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + size_t(r) * dim;
    float* yr = y + size_t(r) * dim;
    float ss = dot(xr, xr, dim);
    float inv = 1.0f / std::sqrt(ss / float(dim) + eps);
    for (int i = 0; i < dim; ++i) yr[i] = weight[i] * (xr[i] * inv);
  }
}

void swiglu(const float* gate, const float* up, size_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  auto eight = [&](const float* g8, const float* u8, float* o8) {
    const __m256 g = _mm256_loadu_ps(g8);
    const __m256 e = exp8(_mm256_xor_ps(g, sign));
    _mm256_storeu_ps(o8, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(u8)));
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) eight(gate + i, up + i, out + i);
  if (i == n) return;
  // The last n % 8 through the same lanes, so every element's bits are exp8's wherever it sits.
  float g8[8] = {}, u8[8] = {}, o8[8];
  std::copy(gate + i, gate + n, g8);
  std::copy(up + i, up + n, u8);
  eight(g8, u8, o8);
  std::copy(o8, o8 + (n - i), out + i);
}

void embedding(const WeightMatrix& table, const int32_t* ids, int n, float* out) {
  for (int i = 0; i < n; ++i) table.row_to_f32(ids[i], out + size_t(i) * table.cols);
}

void rope(float* x, int rows, int heads, int head_dim, const float* cos, const float* sin) {
  const int half = head_dim / 2;
  for (int r = 0; r < rows; ++r) {
    const float* c = cos + size_t(r) * half;
    const float* s = sin + size_t(r) * half;
    for (int h = 0; h < heads; ++h) {
      float* v = x + (size_t(r) * heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

}  // namespace fs::cpu

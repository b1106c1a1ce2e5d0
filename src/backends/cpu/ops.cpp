#include "backends/cpu/ops.h"

#include <cmath>
#include <cstring>
#include <immintrin.h>

#include "core/thread_pool.h"

namespace fs::cpu {

namespace {

// Fixed-order horizontal sum of 8 lanes.
inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

inline __m256 bf16x8_to_f32(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline float weight_at(const WeightMatrix& w, const void* row, int k) {
  return w.dtype == DType::F32 ? static_cast<const float*>(row)[k]
                               : bf16_to_f32(static_cast<const uint16_t*>(row)[k]);
}

// R input rows against one weight row; each row's arithmetic is identical for every R.
template <int R>
void dot_rows(const float* x, size_t x_stride, const WeightMatrix& w, const void* wrow, int K, float* out,
              size_t out_stride) {
  __m256 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  int k = 0;
  if (w.dtype == DType::BF16) {
    const uint16_t* wp = static_cast<const uint16_t*>(wrow);
    for (; k + 16 <= K; k += 16) {
      __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + k));
      __m256 w0 = bf16x8_to_f32(_mm256_castsi256_si128(raw));
      __m256 w1 = bf16x8_to_f32(_mm256_extracti128_si256(raw, 1));
      for (int r = 0; r < R; ++r) {
        const float* xr = x + size_t(r) * x_stride + k;
        acc0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(xr), w0, acc0[r]);
        acc1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 8), w1, acc1[r]);
      }
    }
  } else {
    const float* wp = static_cast<const float*>(wrow);
    for (; k + 16 <= K; k += 16) {
      __m256 w0 = _mm256_loadu_ps(wp + k);
      __m256 w1 = _mm256_loadu_ps(wp + k + 8);
      for (int r = 0; r < R; ++r) {
        const float* xr = x + size_t(r) * x_stride + k;
        acc0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(xr), w0, acc0[r]);
        acc1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 8), w1, acc1[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    float s = hsum(_mm256_add_ps(acc0[r], acc1[r]));
    const float* xr = x + size_t(r) * x_stride;
    for (int t = k; t < K; ++t) s = std::fma(xr[t], weight_at(w, wrow, t), s);
    out[size_t(r) * out_stride] = s;
  }
}

constexpr int kRowGroup = 4;
constexpr int kColBlock = 32;

}  // namespace

void matmul(const float* x, int rows, const WeightMatrix& w, const float* bias, float* y) {
  const int K = w.cols, N = w.rows;
  const size_t row_bytes = size_t(K) * dtype_size(w.dtype);
  auto body = [&](size_t begin, size_t end) {
    for (size_t n0 = begin; n0 < end; n0 += kColBlock) {
      size_t n1 = std::min(end, n0 + kColBlock);
      int m = 0;
      for (; m + kRowGroup <= rows; m += kRowGroup)
        for (size_t n = n0; n < n1; ++n)
          dot_rows<kRowGroup>(x + size_t(m) * K, K, w, static_cast<const char*>(w.data) + n * row_bytes, K,
                              y + size_t(m) * N + n, N);
      // The last 1-3 rows share weight loads too (a verify window of 2 or 3 rows); their arithmetic is unchanged.
      const int left = rows - m;
      for (size_t n = n0; n < n1 && left > 0; ++n) {
        const void* wrow = static_cast<const char*>(w.data) + n * row_bytes;
        float* out = y + size_t(m) * N + n;
        if (left == 3) dot_rows<3>(x + size_t(m) * K, K, w, wrow, K, out, N);
        else if (left == 2) dot_rows<2>(x + size_t(m) * K, K, w, wrow, K, out, N);
        else dot_rows<1>(x + size_t(m) * K, K, w, wrow, K, out, N);
      }
    }
    if (bias)
      for (int m = 0; m < rows; ++m)
        for (size_t n = begin; n < end; ++n) y[size_t(m) * N + n] += bias[n];
  };
  size_t work = size_t(rows) * size_t(N) * size_t(K);
  if (work < (1u << 16)) body(0, size_t(N));
  else ThreadPool::global().parallel_for(size_t(N), body);
}

float dot(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float s = hsum(acc);
  for (; i < n; ++i) s = std::fma(a[i], b[i], s);
  return s;
}

void axpy(float s, const float* v, float* out, int n) {
  __m256 sv = _mm256_set1_ps(s);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(sv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(out + i)));
  for (; i < n; ++i) out[i] = std::fma(s, v[i], out[i]);
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
  for (size_t i = 0; i < n; ++i) {
    float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
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

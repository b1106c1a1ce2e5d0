#include <algorithm>
#include <cmath>

#include "backends/cpu/matmul_kernels.h"

namespace fs::cpu {

namespace {

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
    float s = hsum8(_mm256_add_ps(acc0[r], acc1[r]));
    const float* xr = x + size_t(r) * x_stride;
    for (int t = k; t < K; ++t) s = std::fma(xr[t], weight_at(w, wrow, t), s);
    out[size_t(r) * out_stride] = s;
  }
}

constexpr int kRowGroup = 4;
constexpr size_t kColBlock = 32;

}  // namespace

void matmul_range_avx2(const float* x, int rows, const WeightMatrix& w, size_t begin, size_t end, float* y) {
  const int K = w.cols;
  const size_t N = size_t(w.rows), row_bytes = size_t(K) * dtype_size(w.dtype);
  for (size_t n0 = begin; n0 < end; n0 += kColBlock) {
    const size_t n1 = std::min(end, n0 + kColBlock);
    int m = 0;
    for (; m + kRowGroup <= rows; m += kRowGroup)
      for (size_t n = n0; n < n1; ++n)
        dot_rows<kRowGroup>(x + size_t(m) * K, K, w, static_cast<const char*>(w.data) + n * row_bytes, K,
                            y + size_t(m) * N + n, N);
    // The last 1-3 rows share weight loads too; their arithmetic is unchanged.
    const int left = rows - m;
    for (size_t n = n0; n < n1 && left > 0; ++n) {
      const void* wrow = static_cast<const char*>(w.data) + n * row_bytes;
      float* out = y + size_t(m) * N + n;
      if (left == 3) dot_rows<3>(x + size_t(m) * K, K, w, wrow, K, out, N);
      else if (left == 2) dot_rows<2>(x + size_t(m) * K, K, w, wrow, K, out, N);
      else dot_rows<1>(x + size_t(m) * K, K, w, wrow, K, out, N);
    }
  }
}

}  // namespace fs::cpu

#pragma once
// CPU reference kernels with fp32 accumulation. Every output element's reduction order depends only on the
// sizes of its own row, never on how many rows share the call (batch invariance).
#include <cmath>
#include <cstdint>
#include <span>

#include "backends/cpu/simd.h"
#include "backends/cpu/weight.h"

namespace fs::cpu {

// y[m, n] = sum_k x[m, k] · w[n, k] (+ bias[n]) for m < rows; threads split the n range. A matrix with an int8
// copy (w.int8) goes through matmul_int8: approximate, for drafters.
void matmul(const float* x, int rows, const WeightMatrix& w, const float* bias, float* y);
// One matmul's weights, bias (null → none) and output.
struct MatmulOut {
  const WeightMatrix* w;
  const float* bias;
  float* y;
};
// matmul(x, rows, *o.w, o.bias, o.y) for every o, with the bits of those calls: when every matrix is packed, their
// panels go to the pool in one split (no thread waits between them, and small ones need not run alone).
void matmuls(const float* x, int rows, std::span<const MatmulOut> outs);
// Where this CPU runs AVX-512, gives each matrix a copy of its weights in the layout the AVX-512 matmul reads (one
// copy for matrices of the same weights), all in one block of huge pages; matmul results keep their bits. Returns the
// block's bytes (0 without AVX-512).
size_t pack_for_matmul(std::span<WeightMatrix* const> matrices);
// y = x / sqrt(mean(x²) + eps) · weight, over `rows` vectors of `dim`.
void rmsnorm(const float* x, const float* weight, int rows, int dim, float eps, float* y);
// out[i] = silu(gate[i]) · up[i], 8 at a time through exp8: the bits of the scalar formula with std::exp.
void swiglu(const float* gate, const float* up, size_t n, float* out);
// Rows of the embedding table for `ids`, as floats.
void embedding(const WeightMatrix& table, const int32_t* ids, int n, float* out);
// Rotates x[rows, heads, head_dim] in place (rotate-half layout) by each row's angles: cos/sin[rows, head_dim/2].
void rope(float* x, int rows, int heads, int head_dim, const float* cos, const float* sin);
// Plain dot product in the fixed order the attention kernel uses; inline, as attention calls it once per key.
inline float dot(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float s = hsum8(acc);
  for (; i < n; ++i) s = std::fma(a[i], b[i], s);
  return s;
}

// out[n] += s · v[n].
inline void axpy(float s, const float* v, float* out, int n) {
  const __m256 sv = _mm256_set1_ps(s);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(sv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(out + i)));
  for (; i < n; ++i) out[i] = std::fma(s, v[i], out[i]);
}

}  // namespace fs::cpu

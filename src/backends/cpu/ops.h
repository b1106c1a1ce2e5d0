#pragma once
// CPU reference kernels with fp32 accumulation. Every output element's reduction order depends only on the
// sizes of its own row, never on how many rows share the call (batch invariance).
#include <cstdint>

#include "backends/cpu/weight.h"

namespace fs::cpu {

// y[m, n] = sum_k x[m, k] · w[n, k] (+ bias[n]) for m < rows; threads split the n range.
void matmul(const float* x, int rows, const WeightMatrix& w, const float* bias, float* y);
// y = x / sqrt(mean(x²) + eps) · weight, over `rows` vectors of `dim`.
void rmsnorm(const float* x, const float* weight, int rows, int dim, float eps, float* y);
// out[i] = silu(gate[i]) · up[i].
void swiglu(const float* gate, const float* up, size_t n, float* out);
// Rows of the embedding table for `ids`, as floats.
void embedding(const WeightMatrix& table, const int32_t* ids, int n, float* out);
// Rotates x[rows, heads, head_dim] in place (rotate-half layout) by each row's angles: cos/sin[rows, head_dim/2].
void rope(float* x, int rows, int heads, int head_dim, const float* cos, const float* sin);
// Plain dot product in the fixed order the attention kernel uses.
float dot(const float* a, const float* b, int n);
// out[n] += s · v[n].
void axpy(float s, const float* v, float* out, int n);

}  // namespace fs::cpu

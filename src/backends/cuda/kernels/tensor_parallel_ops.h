#pragma once
// Kernels of a tensor-parallel rank: its vocabulary slice of the embedding, the residual add of an all-reduced
// partial, and the ranks' gathered logit slices laid out as whole rows. Same conventions as ops.h.
#include <cstdint>

namespace fs::cuda::kernels {

// out[r, :] = table[ids[r] − vocab_begin, :] as floats when vocab_begin ≤ ids[r] < vocab_begin + vocab_rows, else 0.
void embedding_slice(const uint16_t* table, const int32_t* ids, int rows, int dim, int vocab_begin, int vocab_rows,
                     float* out, void* stream);

// x[i] += y[i] for i < n.
void add_in_place(float* x, const float* y, size_t n, void* stream);

// gathered [ranks, rows, slice] (each rank's logits of its vocabulary slice) → logits [rows, ranks · slice].
void interleave_slices(const float* gathered, int ranks, int rows, int slice, float* logits, void* stream);

}  // namespace fs::cuda::kernels

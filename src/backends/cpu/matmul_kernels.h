#pragma once
// The CPU matmul's kernels over a range of output features. Every kernel gives each output element the same bits:
// two 8-lane fp32 accumulators over k in steps of 16 (lanes k % 16 < 8 and ≥ 8), fused multiply-adds in k order,
// their sum reduced in a fixed order, then the last K % 16 products fused in one at a time.
#include <cstddef>

#include "backends/cpu/simd.h"
#include "backends/cpu/weight.h"

namespace fs::cpu {

// y[m, n] = sum_k x[m, k] · w[n, k] for m < rows, begin ≤ n < end (no bias), with AVX2.
void matmul_range_avx2(const float* x, int rows, const WeightMatrix& w, size_t begin, size_t end, float* y);
// The same bits with AVX-512 from w.packed, several rows and weight rows per tile; only where avx512_available().
void matmul_range_avx512(const float* x, int rows, const WeightMatrix& w, size_t begin, size_t end, float* y);
// Weight rows per panel of the packed layout.
constexpr int kPanelRows = 4;
// w's weights into dst[w.bytes()] for matmul_range_avx512: each panel of kPanelRows rows (fewer in the last) stores,
// for each 32 columns in turn (bf16; f32 and a bf16 remainder of 16 or more: each 16), its rows' weights one row after
// another, then its rows' last K % 16 weights, so a tile reads memory in order. A row's 32 bf16 weights of columns
// [k, k + 32) interleave its two blocks of 16 (k + j then k + 16 + j), which one shift or one mask turns into floats.
void pack_rows(const WeightMatrix& w, uint8_t* dst);
// Whether this CPU runs AVX-512F.
bool avx512_available();

}  // namespace fs::cpu

#pragma once
// An approximate int8 copy of a weight matrix, for models whose results need not be exact (a drafter only needs its
// top choices): each weight row scaled to ±127 and rounded, each input row to 0..255 over its own range. A quarter of
// f32's bytes and half of bf16's, and 64 multiply-adds per AVX-512 VNNI instruction.
#include <cstdint>
#include <memory>

#include "backends/cpu/weight.h"

namespace fs::cpu {

struct Int8Rows {
  int rows = 0;  // a multiple of kInt8Block
  int cols = 0;  // a multiple of 4
  // Per block of kInt8Block rows, per 4 columns: the block's rows' 4 weights in turn (64 bytes), so one instruction
  // adds 4 columns into 16 rows' sums.
  std::shared_ptr<int8_t[]> packed;
  std::unique_ptr<float[]> scale;  // per row: max |w| / 127
  std::unique_ptr<int32_t[]> sum;  // per row: the sum of its int8 weights (for the inputs' zero points)
  size_t bytes() const { return size_t(rows) * size_t(cols) + size_t(rows) * 8; }
};

constexpr int kInt8Block = 16;

// Whether w can have an int8 copy (its shape fits the layout).
bool int8_fits(const WeightMatrix& w);
// w's int8 copy; w must fit.
std::shared_ptr<const Int8Rows> quantize_rows(const WeightMatrix& w);
// Whether this CPU has AVX-512 VNNI; without it matmul_int8 sums the same integers in portable code.
bool int8_vnni_available();
// y[m, n] ≈ sum_k x[m, k] · w[n, k] (+ bias[n]) for m < rows; threads split the n range. `vnni` false → the portable
// sums (tests compare the two).
void matmul_int8(const float* x, int rows, const Int8Rows& w, const float* bias, float* y,
                 bool vnni = int8_vnni_available());

}  // namespace fs::cpu

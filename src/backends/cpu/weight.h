#pragma once
// A weight matrix [rows, cols] (row-major, one output feature per row) in bf16 or f32, borrowed or owned.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"

namespace fs {

namespace cpu {
struct Int8Rows;
}

struct WeightMatrix {
  DType dtype = DType::BF16;  // BF16 or F32 (f16 checkpoints are widened to F32 at load)
  const void* data = nullptr;
  int rows = 0;
  int cols = 0;
  std::shared_ptr<std::vector<float>> owned;  // set when converted at load
  // The same weights in the layout the CPU's AVX-512 matmul reads (cpu::pack_for_matmul); null → it reads `data`.
  std::shared_ptr<const uint8_t> packed;
  // An approximate int8 copy (cpu::quantize_rows) that the CPU matmul reads instead when set: drafters only.
  std::shared_ptr<const cpu::Int8Rows> int8;

  size_t bytes() const { return size_t(rows) * size_t(cols) * dtype_size(dtype); }
  // Row r as floats into out[cols].
  void row_to_f32(int r, float* out) const;
};

}  // namespace fs

#pragma once
// Host copies of the checkpoint tensors a program's refs name: each part read with the shape the program gives it,
// a tensor-parallel slice cut out, norms as applied (1 + w where the ref says so).
#include <cstddef>
#include <vector>

#include "backends/cpu/weight.h"
#include "models/model_program.h"

namespace fs {

class Checkpoint;

// Part `part` of `m` as a [rows, cols] matrix read in place (bf16/f32 stay in the mapping), or its slice's rows and
// columns copied in the same element type; throws naming a missing part or tensor.
WeightMatrix load_part_matrix(const Checkpoint& ck, const MatrixRef& m, size_t part = 0);

// Part `part` of `v` (its slice, if any) as floats in storage order.
std::vector<float> load_part_floats(const Checkpoint& ck, const VectorRef& v, size_t part = 0);

// Every part of `v`, concatenated.
std::vector<float> load_ref_floats(const Checkpoint& ck, const VectorRef& v);

// The part's slice of `all` (the whole tensor in storage order): its row ranges in order, the column range of each
// row, later dimensions whole; all of it without a slice.
template <typename T>
std::vector<T> placed_elements(const TensorPart& part, const T* all) {
  const size_t total = part.elements();
  if (!part.slice) return std::vector<T>(all, all + total);
  const size_t rows = size_t(part.shape.at(0)), row_len = total / rows;
  const size_t cols = part.shape.size() > 1 ? size_t(part.shape[1]) : 1, inner = row_len / cols;
  std::vector<T> out;
  out.reserve(part.placed_elements());
  for (const IndexRange& r : part.slice->rows)
    for (int64_t row = r.begin; row < r.end; ++row) {
      const T* src = all + size_t(row) * row_len + size_t(part.slice->cols.begin) * inner;
      out.insert(out.end(), src, src + size_t(part.slice->cols.size()) * inner);
    }
  return out;
}

}  // namespace fs

#pragma once
// CPU copies of the tensors a vision tower program names: each part of a matrix or vector ref read with the shape
// the program gives it, and the conv3d patch embedding widened to an fp32 matrix.
#include <cstddef>
#include <vector>

#include "backends/cpu/weight.h"
#include "models/vision_program.h"

namespace fs::vision {

// Part `part` of `m` as a [rows, cols] matrix (bf16/f32 stay in the mapping). Throws naming a missing part or tensor.
WeightMatrix load_part_matrix(const Checkpoint& ck, const MatrixRef& m, size_t part = 0);

// Part `part` of `v` as floats in storage order (1 + w where the ref says so). Throws naming a missing part or tensor.
std::vector<float> load_part_floats(const Checkpoint& ck, const VectorRef& v, size_t part = 0);

// The conv3d kernel `part` [hidden, channels, temporal, patch, patch] as an fp32 [hidden, patch_dim] matrix.
WeightMatrix load_patch_embed(const Checkpoint& ck, const TensorPart& part);

}  // namespace fs::vision

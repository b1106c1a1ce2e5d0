#pragma once
// Typed, shape-checked access to checkpoint tensors for model builders.
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/weight.h"
#include "io/safetensors.h"

namespace fs {

// A matrix [rows, cols]; bf16/f32 stay in the mapping, f16 is widened to f32. Throws naming the tensor.
WeightMatrix load_matrix(const Checkpoint& ck, const std::string& name, int rows, int cols);
// A tensor of exactly `shape` as floats, in storage order.
std::vector<float> load_floats(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& shape);
// A vector of n floats.
std::vector<float> load_vector(const Checkpoint& ck, const std::string& name, int n);
// 1 + w of each weight: RMSNorm scales stored as offsets from one (Qwen3.5).
std::vector<float> one_plus(std::vector<float> w);

}  // namespace fs

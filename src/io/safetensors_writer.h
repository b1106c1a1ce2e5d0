#pragma once
// Writes safetensors files, streaming each tensor's bytes from a generator so large checkpoints need no buffer.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace fs {

struct TensorSource {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;
  // Fills dst[0, n) with the bytes at byte offset `offset` of the tensor.
  std::function<void(size_t offset, uint8_t* dst, size_t n)> fill;
  size_t bytes() const;
};

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorSource>& tensors);

// A source of deterministic pseudo-random values: normal-ish with the given scale (`offset` added), as `dtype`.
TensorSource random_tensor(std::string name, DType dtype, std::vector<int64_t> shape, float scale, uint64_t seed,
                           float offset = 0.0f);

}  // namespace fs

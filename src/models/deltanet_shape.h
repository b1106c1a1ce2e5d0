#pragma once
// The sizes of a Gated DeltaNet layer and of its recurrent state per sequence (shared by the CPU layer and the CUDA
// kernels, whose sources see no C++20 headers).
#include <cstddef>

namespace fs {

struct DeltaNetShape {
  int key_heads = 0, value_heads = 0, key_dim = 0, value_dim = 0, conv_kernel = 0;
  float eps = 1e-6f;  // of the gated output norm

  int key_channels() const { return key_heads * key_dim; }
  int value_channels() const { return value_heads * value_dim; }
  int conv_channels() const { return 2 * key_channels() + value_channels(); }
  // State per sequence: the last conv_kernel − 1 conv inputs, then a key_dim × value_dim matrix per value head.
  size_t conv_state_floats() const { return size_t(conv_kernel - 1) * size_t(conv_channels()); }
  size_t delta_state_floats() const { return size_t(value_heads) * size_t(key_dim) * size_t(value_dim); }
  size_t state_floats() const { return conv_state_floats() + delta_state_floats(); }
};

}  // namespace fs

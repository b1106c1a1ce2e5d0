#pragma once
// The Gated DeltaNet layer (Qwen3.5 / Qwen3-Next linear attention) on the CPU: projections, a causal depthwise
// conv over the q|k|v channels, and the gated delta rule run token by token in fp32, so a token's arithmetic does
// not depend on how its sequence was chunked or what ran beside it.
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/weight.h"

namespace fs {

class Checkpoint;

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

struct DeltaNetWeights {
  WeightMatrix in_qkv, in_z, in_a, in_b, out;
  std::vector<float> conv;  // [conv_channels, conv_kernel]
  std::vector<float> a_log, dt_bias, norm;
  size_t bytes() const;
};

// Loads `prefix` + in_proj_qkv / in_proj_z / in_proj_a / in_proj_b / conv1d / A_log / dt_bias / norm / out_proj.
DeltaNetWeights load_deltanet(const Checkpoint& ck, const std::string& prefix, const DeltaNetShape& shape,
                              int hidden);

// A copy of the layer state taken after the sequence's first `after_rows` rows (1..rows), laid out as the state.
struct DeltaNetTap {
  int after_rows = 0;
  float* state = nullptr;
};

// The consecutive rows of one sequence in a forward pass and its layer state (fresh → cleared first).
struct DeltaNetSequence {
  int first_row = 0;
  int rows = 0;
  float* state = nullptr;
  bool fresh = false;
  std::span<const DeltaNetTap> taps;  // in ascending after_rows
};

// x [T, hidden] (already normed) → out [T, hidden]; each sequence's rows run in order through its own state.
void deltanet_forward(const DeltaNetWeights& w, const DeltaNetShape& shape, const float* x, int T,
                      std::span<const DeltaNetSequence> sequences, float* out);

}  // namespace fs

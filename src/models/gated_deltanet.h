#pragma once
// The Gated DeltaNet layer (Qwen3.5 / Qwen3-Next linear attention) on the CPU: projections, a causal depthwise
// conv over the q|k|v channels, and the gated delta rule run token by token in fp32, so a token's arithmetic does
// not depend on how its sequence was chunked or what ran beside it.
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/weight.h"
#include "models/deltanet_shape.h"

namespace fs {

class Checkpoint;

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
// It runs the three steps below, which are also the CPU references of the CUDA kernels.
void deltanet_forward(const DeltaNetWeights& w, const DeltaNetShape& shape, const float* x, int T,
                      std::span<const DeltaNetSequence> sequences, float* out);

// Causal depthwise conv (weight [conv_channels, conv_kernel]) + SiLU of one sequence's q|k|v rows in [rows,
// conv_channels] → out, continuing from and updating its conv tail [conv_kernel − 1, conv_channels]; each tap gets
// the tail as it stands after its rows, at the start of tap.state.
void deltanet_conv(const DeltaNetShape& shape, const float* weight, const float* in, int rows, float* tail,
                   std::span<const DeltaNetTap> taps, float* out);

// The gated delta rule of one sequence's value head `head`, token by token: conv [rows, conv_channels] (after the
// conv), a and b [rows, value_heads] → that head's columns of core [rows, value_channels]. `state` is the layer
// state (the head's key_dim × value_dim matrix after the conv tail); each tap gets the head's matrix after its rows.
void deltanet_recurrence(const DeltaNetShape& shape, float a_log, float dt_bias, const float* conv, const float* a,
                         const float* b, int rows, int head, float* state, std::span<const DeltaNetTap> taps,
                         float* core);

// Per row and value head: RMSNorm of core over value_dim (plain weight `norm`) × SiLU(z), z [rows, value_channels];
// out may be core.
void deltanet_gated_norm(const DeltaNetShape& shape, const float* norm, const float* core, const float* z, int rows,
                         float* out);

}  // namespace fs

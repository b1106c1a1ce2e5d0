#pragma once
// Rotary embedding frequencies (default and llama3 scaling) and per-position cos/sin rows.
#include <vector>

#include "io/hf_config.h"

namespace fs {

// inv_freq[head_dim/2] as transformers computes it in float32.
std::vector<float> rope_inv_freq(const RopeConfig& rope, int head_dim);
// cos/sin rows [n, inv_freq.size()] for the given positions.
void rope_angles(const std::vector<float>& inv_freq, const int* positions, int n, float* cos, float* sin);
// M-RoPE: rotary index i takes its position from section s (t, h or w) of positions3[n * 3] where `sections`
// splits the inv_freq.size() indices into consecutive runs.
void mrope_angles(const std::vector<float>& inv_freq, const std::vector<int>& sections, const int* positions3, int n,
                  float* cos, float* sin);

}  // namespace fs

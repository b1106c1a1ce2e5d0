#pragma once
// rotary_angles with the cos/sin row of each text position computed once: a row whose three M-RoPE positions agree
// copies that position's row from a table grown on demand (up to kMaxPositions), any other row is computed as it
// comes. The same bits as rotary_angles; not thread-safe.
#include <vector>

#include "models/model_program.h"

namespace fs {

class RotaryAngleCache {
 public:
  static constexpr int kMaxPositions = 32768;

  explicit RotaryAngleCache(const RotarySpec& rotary) : rotary_(rotary), half_(rotary.inv_freq.size()) {}

  // cos and sin rows [n, rotary_dim / 2] for positions3[n * 3], as rotary_angles writes them.
  void angles(const int* positions3, int n, float* cos, float* sin);

 private:
  void grow_to(int positions);

  const RotarySpec& rotary_;
  size_t half_;
  std::vector<float> cos_, sin_;  // [positions filled, half]
};

}  // namespace fs

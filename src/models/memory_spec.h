#pragma once
// The memory one sequence needs, as its model lays it out: K/V pages for the layers that attend, and one
// fixed-size recurrent state for the layers that carry one.
#include <cstddef>

namespace fs {

struct SequenceMemorySpec {
  int kv_layers = 0;  // layers keeping K/V in pages: the pool's layers, in model order
  int kv_heads = 0;
  int head_dim = 0;
  size_t state_floats = 0;  // recurrent state per sequence (0 → none)

  size_t state_bytes() const { return state_floats * sizeof(float); }
  bool has_state() const { return state_floats > 0; }
};

}  // namespace fs

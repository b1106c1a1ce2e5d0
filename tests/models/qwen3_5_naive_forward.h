#pragma once
// An independent, deliberately plain double-precision Qwen3.5 forward (no cache): the gated delta rule token by
// token as transformers' recurrent form writes it, gated attention over the whole sequence.
#include <vector>

#include "io/hf_config.h"
#include "io/safetensors.h"

namespace fs::test {

struct Qwen35NaiveShape {
  std::vector<bool> linear;  // per layer
  int key_heads, value_heads, key_dim, value_dim, conv_kernel, rotary_dim;
};

// Logits [ids.size(), vocab] for every position.
std::vector<double> qwen3_5_naive_forward(const ModelConfig& c, const Qwen35NaiveShape& s, const Checkpoint& ck,
                                          const std::vector<int32_t>& ids);

}  // namespace fs::test

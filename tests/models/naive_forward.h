#pragma once
// An independent, deliberately plain double-precision Llama-family forward (no KV cache), to check the engine's
// forward on checkpoints of shapes the fixtures do not cover.
#include <vector>

#include "io/hf_config.h"
#include "io/safetensors.h"

namespace fs::test {

// Logits [ids.size(), vocab] for every position.
std::vector<double> naive_forward(const ModelConfig& c, const Checkpoint& ck, const std::vector<int32_t>& ids,
                                  bool qkv_bias, bool qk_norm);

}  // namespace fs::test

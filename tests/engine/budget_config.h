#pragma once
// The small dense model the memory-budget tests size their pools and lines for.
#include "io/hf_config.h"

namespace fs::test {

inline ModelConfig small_budget_config() {
  ModelConfig c;
  c.vocab_size = 1000;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  return c;
}

}  // namespace fs::test

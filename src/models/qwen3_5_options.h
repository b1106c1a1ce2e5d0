#pragma once
// The Qwen3.5 hybrid family's config options (read from config.json, checked by name) and its sequence memory.
#include <string>
#include <vector>

#include "io/hf_config.h"
#include "models/gated_deltanet.h"
#include "models/memory_spec.h"

namespace fs {

class Checkpoint;

struct Qwen35Options {
  std::string prefix = "model.";  // where the decoder's tensors live ("model.language_model." in the VL export)
  std::vector<bool> linear;       // per layer: Gated DeltaNet (true) or gated full attention (false)
  DeltaNetShape deltanet;
  int rotary_dim = 0;               // leading dims of each attention head that rotate (head_dim × partial factor)
  std::vector<int> mrope_section;   // interleaved t/h/w sections of the rotary half
  // Qwen3-Next's layout: DeltaNet projections packed per key head in in_proj_qkvz / in_proj_ba.
  bool packed_projections = false;

  int attention_layers() const;
  int linear_layers() const;
};

// Whether config.architecture is a Qwen3.5 text model (Qwen3_5ForCausalLM, or the text side of
// Qwen3_5ForConditionalGeneration) or a Qwen3NextForCausalLM (the same arithmetic, packed DeltaNet projections,
// plain rotary).
bool is_qwen3_5(const ModelConfig& config);
bool is_qwen3_next(const ModelConfig& config);
// The options of a Qwen3.5 or Qwen3-Next config; a bad config (zero heads, value heads not a multiple of key heads,
// an unknown layer type, MoE layers, Qwen3-Next MTP layers) is refused naming the field. `checkpoint` (may be null)
// tells where the decoder lives.
Qwen35Options qwen3_5_options(const ModelConfig& config, const Checkpoint* checkpoint);
// K/V pages for the attention layers only; per sequence, a conv tail and a delta state for each linear layer.
SequenceMemorySpec qwen3_5_memory_spec(const ModelConfig& config);

}  // namespace fs

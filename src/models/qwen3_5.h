#pragma once
// The Qwen3.5 hybrid family (Qwen3_5ForCausalLM and the text side of Qwen3_5ForConditionalGeneration): decoder
// layers of Gated DeltaNet or gated full attention, each followed by a SwiGLU MLP, (1 + w) RMSNorms, tied or
// untied head. K/V pages for the attention layers only; one recurrent-state slot per sequence.
#include <memory>

#include "models/model.h"

namespace fs {

class Checkpoint;

std::unique_ptr<Model> create_qwen3_5(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint);

}  // namespace fs

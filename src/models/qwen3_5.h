#pragma once
// The Qwen3.5 hybrid family as a program: Gated DeltaNet layers beside gated full-attention layers (their pattern
// from the config), (1 + w) RMSNorms, SwiGLU MLPs, interleaved M-RoPE on part of each attention head.
#include "io/hf_config.h"
#include "models/model_program.h"

namespace fs {

class Checkpoint;

// Bad configs are refused by name (qwen3_5_options); `checkpoint` (may be null) tells where the decoder lives.
ModelProgram qwen3_5_program(const ModelConfig& config, const Checkpoint* checkpoint);

}  // namespace fs

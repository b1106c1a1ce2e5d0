#pragma once
// The Llama family (Llama 3.x, Qwen2/2.5, Qwen3, Mistral, the language model of Qwen2.5-VL) as a program:
// RMSNorm, GQA attention with RoPE (optional q/k biases and q/k norms), SwiGLU MLP, tied or untied head.
#include <string>

#include "io/hf_config.h"
#include "models/model_program.h"

namespace fs {

class Checkpoint;

struct LlamaFamilyOptions {
  bool qkv_bias = false;
  bool qk_norm = false;
  std::string prefix = "model.";  // where the decoder's tensors live in the checkpoint
};

// The variant an architecture needs (biases, q/k norms, tensor prefix); unknown architectures are refused by name.
// `checkpoint` (may be null) tells where a vision-language export keeps its language model.
LlamaFamilyOptions llama_family_options(const ModelConfig& config, const Checkpoint* checkpoint);

ModelProgram llama_family_program(const ModelConfig& config, const LlamaFamilyOptions& options,
                                  const Checkpoint* checkpoint);

}  // namespace fs

// Builds the model config.json's "architectures" names on the CPU; anything else is refused by name.
#include "io/safetensors.h"
#include "models/cpu_runner.h"
#include "models/model.h"
#include "models/model_program.h"
#include "models/qwen3_5_options.h"

namespace fs {

SequenceMemorySpec memory_spec_for(const ModelConfig& c) {
  if (is_qwen3_5(c)) return qwen3_5_memory_spec(c);
  return {.kv_layers = c.num_layers, .kv_heads = c.num_kv_heads, .head_dim = c.head_dim};
}

std::unique_ptr<Model> create_model(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint) {
  ModelProgram program = model_program(config, checkpoint.get());
  return create_cpu_model(config, std::move(program), std::move(checkpoint));
}

}  // namespace fs

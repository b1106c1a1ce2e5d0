// Maps config.json "architectures" to model builders; anything else is refused by name.
#include "core/error.h"
#include "io/safetensors.h"
#include "models/llama.h"
#include "models/model.h"
#include "models/qwen3_5.h"
#include "models/qwen3_5_options.h"

namespace fs {

LlamaFamilyOptions llama_family_options(const ModelConfig& c, const Checkpoint* ck) {
  const std::string& a = c.architecture;
  if (c.hidden_act != "silu") throw Error("hidden_act '" + c.hidden_act + "' is not supported (only silu)");
  if (a == "LlamaForCausalLM" || a == "MistralForCausalLM") return {.qkv_bias = c.attention_bias};
  if (a == "Qwen2ForCausalLM") return {.qkv_bias = true};
  if (a == "Qwen2_5_VLForConditionalGeneration") {
    // The language side; newer exports nest it under model.language_model.
    return {.qkv_bias = true,
            .prefix = ck && ck->has("model.language_model.embed_tokens.weight") ? "model.language_model." : "model."};
  }
  if (a == "Qwen3ForCausalLM") return {.qkv_bias = c.attention_bias, .qk_norm = true};
  throw Error("architecture '" + a + "' is not supported (supported: LlamaForCausalLM, MistralForCausalLM, "
              "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen2_5_VLForConditionalGeneration, Qwen3_5ForCausalLM, "
              "Qwen3_5ForConditionalGeneration)");
}

SequenceMemorySpec memory_spec_for(const ModelConfig& c) {
  if (is_qwen3_5(c)) return qwen3_5_memory_spec(c);
  return {.kv_layers = c.num_layers, .kv_heads = c.num_kv_heads, .head_dim = c.head_dim};
}

std::unique_ptr<Model> create_model(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint) {
  if (is_qwen3_5(config)) return create_qwen3_5(config, std::move(checkpoint));
  LlamaFamilyOptions options = llama_family_options(config, checkpoint.get());
  return create_llama_family(config, std::move(checkpoint), options);
}

}  // namespace fs

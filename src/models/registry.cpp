// Maps config.json "architectures" to model builders; anything else is refused by name.
#include "core/error.h"
#include "io/safetensors.h"
#include "models/llama.h"
#include "models/model.h"

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
              "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen2_5_VLForConditionalGeneration)");
}

std::unique_ptr<Model> create_model(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint) {
  LlamaFamilyOptions options = llama_family_options(config, checkpoint.get());
  return create_llama_family(config, std::move(checkpoint), options);
}

}  // namespace fs

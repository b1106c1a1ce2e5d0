// Maps config.json "architectures" to model builders; anything else is refused by name.
#include "core/error.h"
#include "io/safetensors.h"
#include "models/llama.h"
#include "models/model.h"

namespace fs {

std::unique_ptr<Model> create_model(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint) {
  const std::string& a = config.architecture;
  if (config.hidden_act != "silu")
    throw Error("hidden_act '" + config.hidden_act + "' is not supported (only silu)");
  if (a == "LlamaForCausalLM" || a == "MistralForCausalLM") {
    return create_llama_family(config, std::move(checkpoint), {.qkv_bias = config.attention_bias});
  }
  if (a == "Qwen2ForCausalLM") return create_llama_family(config, std::move(checkpoint), {.qkv_bias = true});
  if (a == "Qwen2_5_VLForConditionalGeneration") {
    // The language side; newer exports nest it under model.language_model.
    std::string prefix = checkpoint->has("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
    return create_llama_family(config, std::move(checkpoint), {.qkv_bias = true, .prefix = prefix});
  }
  if (a == "Qwen3ForCausalLM") {
    return create_llama_family(config, std::move(checkpoint), {.qkv_bias = config.attention_bias, .qk_norm = true});
  }
  throw Error("architecture '" + a + "' is not supported (supported: LlamaForCausalLM, MistralForCausalLM, "
              "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen2_5_VLForConditionalGeneration)");
}

}  // namespace fs

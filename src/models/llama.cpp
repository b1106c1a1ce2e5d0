#include "models/llama.h"

#include "core/error.h"
#include "io/safetensors.h"
#include "models/rope_table.h"

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

ModelProgram llama_family_program(const ModelConfig& c, const LlamaFamilyOptions& o, const Checkpoint* ck) {
  const int H = c.hidden_size, hd = c.head_dim, Q = c.num_heads * hd, KV = c.num_kv_heads * hd;
  ModelProgram p;
  p.family = "llama";
  set_decoder_ends(p, c, o.prefix, ck, false);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string l = o.prefix + "layers." + std::to_string(i) + ".", a = l + "self_attn.";
    LayerProgram L;
    L.norm = vector_ref("attention norm", {vector_part(l + "input_layernorm.weight", H)});
    L.mlp_norm = vector_ref("MLP norm", {vector_part(l + "post_attention_layernorm.weight", H)});
    AttentionStep s;
    s.qkv = matrix_ref("q/k/v projections", {matrix_part(a + "q_proj.weight", Q, H),
                                              matrix_part(a + "k_proj.weight", KV, H),
                                              matrix_part(a + "v_proj.weight", KV, H)});
    if (o.qkv_bias)
      s.qkv_bias = vector_ref("q/k/v biases", {vector_part(a + "q_proj.bias", Q), vector_part(a + "k_proj.bias", KV),
                                                vector_part(a + "v_proj.bias", KV)});
    if (o.qk_norm) {
      s.q_norm = vector_ref("q norm", {vector_part(a + "q_norm.weight", hd)});
      s.k_norm = vector_ref("k norm", {vector_part(a + "k_norm.weight", hd)});
    }
    s.o = matrix_ref("o projection", {matrix_part(a + "o_proj.weight", H, Q)});
    s.heads = c.num_heads;
    s.kv_heads = c.num_kv_heads;
    s.head_dim = s.rotary_dim = hd;
    s.kv_layer = i;
    L.attention = std::move(s);
    L.mlp = swiglu_step(l + "mlp.", H, c.intermediate_size);
    p.layers.push_back(std::move(L));
  }
  p.rotary.inv_freq = rope_inv_freq(c.rope, hd);
  p.rotary.sections = c.rope.mrope_section.empty() ? std::vector<int>{hd / 2} : c.rope.mrope_section;
  p.rotary.rotary_dim = hd;
  p.memory = {.kv_layers = c.num_layers, .kv_heads = c.num_kv_heads, .head_dim = hd};
  return p;
}

}  // namespace fs

#include "models/qwen3_5.h"

#include "models/qwen3_5_options.h"
#include "models/rope_table.h"

namespace fs {

namespace {

AttentionStep gated_attention_step(const ModelConfig& c, const Qwen35Options& o, const std::string& a, int kv_layer) {
  const int H = c.hidden_size, hd = c.head_dim, Q = c.num_heads * hd, KV = c.num_kv_heads * hd;
  AttentionStep s;
  s.qkv = matrix_ref("q (query and gate)/k/v projections", {matrix_part(a + "q_proj.weight", 2 * Q, H),
                                                             matrix_part(a + "k_proj.weight", KV, H),
                                                             matrix_part(a + "v_proj.weight", KV, H)});
  s.q_norm = vector_ref("q norm", {vector_part(a + "q_norm.weight", hd)}, true);
  s.k_norm = vector_ref("k norm", {vector_part(a + "k_norm.weight", hd)}, true);
  s.o = matrix_ref("o projection", {matrix_part(a + "o_proj.weight", H, Q)});
  s.heads = c.num_heads;
  s.kv_heads = c.num_kv_heads;
  s.head_dim = hd;
  s.rotary_dim = o.rotary_dim;
  s.output_gate = true;
  s.kv_layer = kv_layer;
  return s;
}

DeltaNetStep deltanet_step(const ModelConfig& c, const DeltaNetShape& d, const std::string& a, size_t state_offset) {
  const int H = c.hidden_size, C = d.conv_channels(), V = d.value_channels();
  DeltaNetStep s;
  s.in_qkv = matrix_ref("DeltaNet q/k/v projection", {matrix_part(a + "in_proj_qkv.weight", C, H)});
  s.in_z = matrix_ref("DeltaNet z projection", {matrix_part(a + "in_proj_z.weight", V, H)});
  s.in_a = matrix_ref("DeltaNet a projection", {matrix_part(a + "in_proj_a.weight", d.value_heads, H)});
  s.in_b = matrix_ref("DeltaNet b projection", {matrix_part(a + "in_proj_b.weight", d.value_heads, H)});
  s.out = matrix_ref("DeltaNet out projection", {matrix_part(a + "out_proj.weight", H, V)});
  s.conv = vector_ref("DeltaNet conv", {{a + "conv1d.weight", {C, 1, d.conv_kernel}}});
  s.a_log = vector_ref("DeltaNet A_log", {vector_part(a + "A_log", d.value_heads)});
  s.dt_bias = vector_ref("DeltaNet dt_bias", {vector_part(a + "dt_bias", d.value_heads)});
  s.norm = vector_ref("DeltaNet norm", {vector_part(a + "norm.weight", d.value_dim)});
  s.shape = d;
  s.state_offset = state_offset;
  return s;
}

}  // namespace

ModelProgram qwen3_5_program(const ModelConfig& c, const Checkpoint* ck) {
  const Qwen35Options o = qwen3_5_options(c, ck);
  const int H = c.hidden_size;
  ModelProgram p;
  p.family = "qwen3.5";
  set_decoder_ends(p, c, o.prefix, ck, true);
  int linear = 0, attention = 0;
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string l = o.prefix + "layers." + std::to_string(i) + ".";
    LayerProgram L;
    L.norm = vector_ref("input norm", {vector_part(l + "input_layernorm.weight", H)}, true);
    L.mlp_norm = vector_ref("MLP norm", {vector_part(l + "post_attention_layernorm.weight", H)}, true);
    if (o.linear[size_t(i)])
      L.deltanet = deltanet_step(c, o.deltanet, l + "linear_attn.", size_t(linear++) * o.deltanet.state_floats());
    else
      L.attention = gated_attention_step(c, o, l + "self_attn.", attention++);
    L.mlp = swiglu_step(l + "mlp.", H, c.intermediate_size);
    p.layers.push_back(std::move(L));
  }
  p.rotary.inv_freq = rope_inv_freq(c.rope, o.rotary_dim);
  p.rotary.sections = o.mrope_section;
  p.rotary.interleaved = true;
  p.rotary.rotary_dim = o.rotary_dim;
  p.memory = qwen3_5_memory_spec(c);
  return p;
}

}  // namespace fs

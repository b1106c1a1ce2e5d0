#include "models/qwen3_5.h"

#include <utility>

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

// A part of `name` [rows, cols] that places the given row ranges, in order.
TensorPart rows_of(const std::string& name, int64_t rows, int cols, std::vector<IndexRange> ranges) {
  TensorPart p = matrix_part(name, int(rows), cols);
  p.slice = TensorSlice{std::move(ranges), {0, cols}};
  return p;
}

// Qwen3-Next packs the projections per key head g (transformers' fix_query_key_value_ordering): in_proj_qkvz holds
// [q (key_dim), k (key_dim), v (r·value_dim), z (r·value_dim)] for each g, in_proj_ba [b (r), a (r)], r value heads
// per key head. The step reads the same rows as Qwen3.5's in_proj_qkv / in_proj_z / in_proj_b / in_proj_a.
void set_packed_projections(DeltaNetStep& s, const DeltaNetShape& d, const std::string& a, int H) {
  const int64_t r = d.value_heads / d.key_heads, dk = d.key_dim, rv = r * d.value_dim, group = 2 * dk + 2 * rv;
  auto per_group = [&](int64_t stride, int64_t offset, int64_t size) {
    std::vector<IndexRange> ranges;
    for (int64_t g = 0; g < d.key_heads; ++g) ranges.push_back({g * stride + offset, g * stride + offset + size});
    return ranges;
  };
  std::vector<IndexRange> qkv;  // every q, then every k, then every v
  for (const auto& [offset, size] : {std::pair{int64_t{0}, dk}, {dk, dk}, {2 * dk, rv}}) {
    const std::vector<IndexRange> part = per_group(group, offset, size);
    qkv.insert(qkv.end(), part.begin(), part.end());
  }
  const std::string qkvz = a + "in_proj_qkvz.weight", ba = a + "in_proj_ba.weight";
  const int64_t qkvz_rows = d.key_heads * group, ba_rows = 2 * d.value_heads;
  s.in_qkv = matrix_ref("DeltaNet q/k/v projection", {rows_of(qkvz, qkvz_rows, H, qkv)});
  s.in_z = matrix_ref("DeltaNet z projection", {rows_of(qkvz, qkvz_rows, H, per_group(group, 2 * dk + rv, rv))});
  s.in_b = matrix_ref("DeltaNet b projection", {rows_of(ba, ba_rows, H, per_group(2 * r, 0, r))});
  s.in_a = matrix_ref("DeltaNet a projection", {rows_of(ba, ba_rows, H, per_group(2 * r, r, r))});
}

DeltaNetStep deltanet_step(const ModelConfig& c, const Qwen35Options& o, const std::string& a, size_t state_offset) {
  const DeltaNetShape& d = o.deltanet;
  const int H = c.hidden_size, C = d.conv_channels(), V = d.value_channels();
  DeltaNetStep s;
  if (o.packed_projections) {
    set_packed_projections(s, d, a, H);
  } else {
    s.in_qkv = matrix_ref("DeltaNet q/k/v projection", {matrix_part(a + "in_proj_qkv.weight", C, H)});
    s.in_z = matrix_ref("DeltaNet z projection", {matrix_part(a + "in_proj_z.weight", V, H)});
    s.in_a = matrix_ref("DeltaNet a projection", {matrix_part(a + "in_proj_a.weight", d.value_heads, H)});
    s.in_b = matrix_ref("DeltaNet b projection", {matrix_part(a + "in_proj_b.weight", d.value_heads, H)});
  }
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
  p.family = o.packed_projections ? "qwen3-next" : "qwen3.5";
  set_decoder_ends(p, c, o.prefix, ck, true);
  int linear = 0, attention = 0;
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string l = o.prefix + "layers." + std::to_string(i) + ".";
    LayerProgram L;
    L.norm = vector_ref("input norm", {vector_part(l + "input_layernorm.weight", H)}, true);
    L.mlp_norm = vector_ref("MLP norm", {vector_part(l + "post_attention_layernorm.weight", H)}, true);
    if (o.linear[size_t(i)])
      L.deltanet = deltanet_step(c, o, l + "linear_attn.", size_t(linear++) * o.deltanet.state_floats());
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

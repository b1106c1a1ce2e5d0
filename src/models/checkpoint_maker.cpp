#include "models/checkpoint_maker.h"

#include <fstream>

#include "core/error.h"
#include "io/hf_config.h"
#include "io/safetensors_writer.h"
#include "models/qwen3_5_options.h"

namespace fs {

using nlohmann::json;

namespace {

bool is_vl(const std::string& arch) { return arch == "Qwen2_5_VLForConditionalGeneration"; }

void add_llama_specs(std::vector<TensorSpec>& t, const ModelConfig& c, bool qkv_bias, bool qk_norm) {
  const int64_t H = c.hidden_size, Q = int64_t(c.num_heads) * c.head_dim, KV = int64_t(c.num_kv_heads) * c.head_dim;
  const int64_t F = c.intermediate_size, V = c.vocab_size;
  auto w = [&](std::string name, std::vector<int64_t> shape) { t.push_back({std::move(name), std::move(shape)}); };
  auto norm = [&](std::string name, int64_t n) { t.push_back({std::move(name), {n}, 0.05f, 1.0f}); };
  w("model.embed_tokens.weight", {V, H});
  for (int i = 0; i < c.num_layers; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    norm(p + "input_layernorm.weight", H);
    norm(p + "post_attention_layernorm.weight", H);
    w(p + "self_attn.q_proj.weight", {Q, H});
    w(p + "self_attn.k_proj.weight", {KV, H});
    w(p + "self_attn.v_proj.weight", {KV, H});
    w(p + "self_attn.o_proj.weight", {H, Q});
    if (qkv_bias) {
      w(p + "self_attn.q_proj.bias", {Q});
      w(p + "self_attn.k_proj.bias", {KV});
      w(p + "self_attn.v_proj.bias", {KV});
    }
    if (qk_norm) {
      norm(p + "self_attn.q_norm.weight", c.head_dim);
      norm(p + "self_attn.k_norm.weight", c.head_dim);
    }
    w(p + "mlp.gate_proj.weight", {F, H});
    w(p + "mlp.up_proj.weight", {F, H});
    w(p + "mlp.down_proj.weight", {H, F});
  }
  norm("model.norm.weight", H);
  if (!c.tie_word_embeddings) w("lm_head.weight", {V, H});
}

// The Qwen2.5-VL tower (`visual.*`): conv3d patch embedding, blocks with fused qkv and a biased SwiGLU MLP, and
// the merger over spatial_merge_size² neighbouring patches.
void add_vision_specs(std::vector<TensorSpec>& t, const json& v) {
  const int64_t H = v.at("hidden_size").get<int64_t>(), F = v.at("intermediate_size").get<int64_t>();
  const int64_t C = v.value("in_chans", int64_t{3}), P = v.value("patch_size", int64_t{14});
  const int64_t T = v.value("temporal_patch_size", int64_t{2}), S = v.value("spatial_merge_size", int64_t{2});
  const int64_t M = H * S * S, O = v.at("out_hidden_size").get<int64_t>();
  auto w = [&](std::string name, std::vector<int64_t> shape) { t.push_back({std::move(name), std::move(shape)}); };
  auto norm = [&](std::string name, int64_t n) { t.push_back({std::move(name), {n}, 0.05f, 1.0f}); };
  w("visual.patch_embed.proj.weight", {H, C, T, P, P});
  for (int i = 0; i < v.at("depth").get<int>(); ++i) {
    std::string p = "visual.blocks." + std::to_string(i) + ".";
    norm(p + "norm1.weight", H);
    norm(p + "norm2.weight", H);
    w(p + "attn.qkv.weight", {3 * H, H});
    w(p + "attn.qkv.bias", {3 * H});
    w(p + "attn.proj.weight", {H, H});
    w(p + "attn.proj.bias", {H});
    w(p + "mlp.gate_proj.weight", {F, H});
    w(p + "mlp.gate_proj.bias", {F});
    w(p + "mlp.up_proj.weight", {F, H});
    w(p + "mlp.up_proj.bias", {F});
    w(p + "mlp.down_proj.weight", {H, F});
    w(p + "mlp.down_proj.bias", {H});
  }
  norm("visual.merger.ln_q.weight", H);
  w("visual.merger.mlp.0.weight", {M, M});
  w("visual.merger.mlp.0.bias", {M});
  w("visual.merger.mlp.2.weight", {O, M});
  w("visual.merger.mlp.2.bias", {O});
}

// Qwen3.5's text model (`model.language_model.*` in the vision-language export, `model.*` alone; Qwen3-Next's
// packed projections): its norms are stored as offsets from one, so they sit near 0; the DeltaNet gated norm is a
// plain weight near 1; A_log keeps exp(A_log) (the decay rate) within about [1, 16].
void add_qwen3_5_specs(std::vector<TensorSpec>& t, const ModelConfig& c, const std::string& prefix) {
  const Qwen35Options o = qwen3_5_options(c, nullptr);
  const DeltaNetShape& d = o.deltanet;
  const int64_t H = c.hidden_size, Q = int64_t(c.num_heads) * c.head_dim, KV = int64_t(c.num_kv_heads) * c.head_dim;
  const int64_t F = c.intermediate_size, V = c.vocab_size, C = d.conv_channels(), VC = d.value_channels();
  auto w = [&](std::string name, std::vector<int64_t> shape) { t.push_back({std::move(name), std::move(shape)}); };
  auto spread = [&](std::string name, int64_t n, float scale, float offset) {
    t.push_back({std::move(name), {n}, scale, offset});
  };
  auto offset_norm = [&](std::string name, int64_t n) { spread(std::move(name), n, 0.05f, 0.0f); };
  w(prefix + "embed_tokens.weight", {V, H});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = prefix + "layers." + std::to_string(i) + ".";
    offset_norm(p + "input_layernorm.weight", H);
    offset_norm(p + "post_attention_layernorm.weight", H);
    if (o.linear[size_t(i)]) {
      const std::string a = p + "linear_attn.";
      if (o.packed_projections) {  // Qwen3-Next: q|k|v|z and b|a packed per key head
        w(a + "in_proj_qkvz.weight", {C + VC, H});
        w(a + "in_proj_ba.weight", {2 * d.value_heads, H});
      } else {
        w(a + "in_proj_qkv.weight", {C, H});
        w(a + "in_proj_z.weight", {VC, H});
        w(a + "in_proj_a.weight", {d.value_heads, H});
        w(a + "in_proj_b.weight", {d.value_heads, H});
      }
      t.push_back({a + "conv1d.weight", {C, 1, d.conv_kernel}, 0.1f, 0.0f});
      spread(a + "A_log", d.value_heads, 0.4f, 1.386f);
      spread(a + "dt_bias", d.value_heads, 0.1f, 0.0f);
      spread(a + "norm.weight", d.value_dim, 0.05f, 1.0f);
      w(a + "out_proj.weight", {H, VC});
    } else {
      const std::string a = p + "self_attn.";
      w(a + "q_proj.weight", {2 * Q, H});  // a query and an output gate per head
      w(a + "k_proj.weight", {KV, H});
      w(a + "v_proj.weight", {KV, H});
      w(a + "o_proj.weight", {H, Q});
      offset_norm(a + "q_norm.weight", c.head_dim);
      offset_norm(a + "k_norm.weight", c.head_dim);
    }
    w(p + "mlp.gate_proj.weight", {F, H});
    w(p + "mlp.up_proj.weight", {F, H});
    w(p + "mlp.down_proj.weight", {H, F});
  }
  offset_norm(prefix + "norm.weight", H);
  if (!c.tie_word_embeddings) w("lm_head.weight", {V, H});
}

// The Qwen3.5 tower (`model.visual.*`): biased conv3d patch embedding, the learned position grid, LayerNorm blocks
// with fused qkv and a GELU MLP, and the merger over spatial_merge_size² neighbouring patches.
void add_qwen3_5_vision_specs(std::vector<TensorSpec>& t, const json& v) {
  const int64_t H = v.at("hidden_size").get<int64_t>(), F = v.at("intermediate_size").get<int64_t>();
  const int64_t C = v.value("in_channels", int64_t{3}), P = v.value("patch_size", int64_t{16});
  const int64_t T = v.value("temporal_patch_size", int64_t{2}), S = v.value("spatial_merge_size", int64_t{2});
  const int64_t M = H * S * S, O = v.at("out_hidden_size").get<int64_t>();
  const int64_t grid = v.at("num_position_embeddings").get<int64_t>();
  const std::string p = "model.visual.";
  auto w = [&](std::string name, std::vector<int64_t> shape) { t.push_back({std::move(name), std::move(shape)}); };
  auto layer_norm = [&](const std::string& name, int64_t n) {
    t.push_back({name + ".weight", {n}, 0.05f, 1.0f});
    t.push_back({name + ".bias", {n}, 0.02f, 0.0f});
  };
  w(p + "patch_embed.proj.weight", {H, C, T, P, P});
  w(p + "patch_embed.proj.bias", {H});
  w(p + "pos_embed.weight", {grid, H});
  for (int i = 0; i < v.at("depth").get<int>(); ++i) {
    const std::string b = p + "blocks." + std::to_string(i) + ".";
    layer_norm(b + "norm1", H);
    layer_norm(b + "norm2", H);
    w(b + "attn.qkv.weight", {3 * H, H});
    w(b + "attn.qkv.bias", {3 * H});
    w(b + "attn.proj.weight", {H, H});
    w(b + "attn.proj.bias", {H});
    w(b + "mlp.linear_fc1.weight", {F, H});
    w(b + "mlp.linear_fc1.bias", {F});
    w(b + "mlp.linear_fc2.weight", {H, F});
    w(b + "mlp.linear_fc2.bias", {H});
  }
  layer_norm(p + "merger.norm", H);
  w(p + "merger.linear_fc1.weight", {M, M});
  w(p + "merger.linear_fc1.bias", {M});
  w(p + "merger.linear_fc2.weight", {O, M});
  w(p + "merger.linear_fc2.bias", {O});
}

void write_json(const std::filesystem::path& path, const json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw Error("cannot write " + path.string());
}

std::string shard_name(int i, int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i + 1, n);
  return buf;
}

}  // namespace

std::vector<TensorSpec> checkpoint_tensor_specs(const json& config) {
  ModelConfig c = parse_model_config(config, "config");
  const std::string& a = c.architecture;
  std::vector<TensorSpec> t;
  if (is_qwen3_5(c)) {
    const bool vl = config.contains("vision_config");
    add_qwen3_5_specs(t, c, vl ? "model.language_model." : "model.");
    if (vl) add_qwen3_5_vision_specs(t, config.at("vision_config"));
    return t;
  }
  if (a != "LlamaForCausalLM" && a != "Qwen2ForCausalLM" && a != "Qwen3ForCausalLM" && a != "MistralForCausalLM" &&
      !is_vl(a))
    throw Error("make-checkpoint writes Llama-family, Qwen2.5-VL and Qwen3.5 models only, not " + a);
  add_llama_specs(t, c, a == "Qwen2ForCausalLM" || is_vl(a) || c.attention_bias, a == "Qwen3ForCausalLM");
  if (is_vl(a) && config.contains("vision_config")) add_vision_specs(t, config.at("vision_config"));
  return t;
}

json preprocessor_config_for(const json& config) {
  const json& v = config.at("vision_config");
  if (is_qwen3_5(parse_model_config(config, "config")))
    return {{"size", {{"longest_edge", 16777216}, {"shortest_edge", 4096}}},
            {"patch_size", v.value("patch_size", 16)}, {"temporal_patch_size", v.value("temporal_patch_size", 2)},
            {"merge_size", v.value("spatial_merge_size", 2)},
            {"image_mean", {0.5, 0.5, 0.5}}, {"image_std", {0.5, 0.5, 0.5}},
            {"image_processor_type", "Qwen2VLImageProcessor"}, {"do_resize", true}, {"do_rescale", true},
            {"do_normalize", true}, {"do_convert_rgb", true}, {"rescale_factor", 1.0 / 255.0}, {"resample", 3}};
  return {{"min_pixels", 3136}, {"max_pixels", 12845056}, {"patch_size", v.value("patch_size", 14)},
          {"temporal_patch_size", v.value("temporal_patch_size", 2)}, {"merge_size", v.value("spatial_merge_size", 2)},
          {"image_mean", {0.48145466, 0.4578275, 0.40821073}}, {"image_std", {0.26862954, 0.26130258, 0.27577711}},
          {"image_processor_type", "Qwen2VLImageProcessor"}, {"processor_class", "Qwen2_5_VLProcessor"},
          {"do_resize", true}, {"do_rescale", true}, {"do_normalize", true}, {"do_convert_rgb", true},
          {"rescale_factor", 1.0 / 255.0}, {"resample", 3}};
}

void make_checkpoint(const json& config, const std::filesystem::path& out, const MakeCheckpointOptions& o) {
  std::vector<TensorSource> tensors;
  uint64_t s = o.seed * 1000;
  for (auto& spec : checkpoint_tensor_specs(config))
    tensors.push_back(random_tensor(spec.name, o.dtype, spec.shape, spec.scale, ++s, spec.offset));
  std::filesystem::create_directories(out);
  json cfg = config;
  cfg["torch_dtype"] = o.dtype == DType::BF16 ? "bfloat16" : o.dtype == DType::F16 ? "float16" : "float32";
  write_json(out / "config.json", cfg);
  const json eos = parse_model_config(config, "config").fields.at("eos_token_id");  // text_config's when nested
  write_json(out / "generation_config.json", {{"eos_token_id", eos}, {"do_sample", false}});
  if (config.contains("vision_config")) write_json(out / "preprocessor_config.json", preprocessor_config_for(config));
  const int n = std::max(1, o.shards);
  if (n == 1) {
    write_safetensors(out / "model.safetensors", tensors);
  } else {
    json map = json::object();
    size_t per = (tensors.size() + size_t(n) - 1) / size_t(n);
    for (int i = 0; i < n; ++i) {
      std::vector<TensorSource> part;
      for (size_t k = size_t(i) * per; k < std::min(tensors.size(), size_t(i + 1) * per); ++k) {
        part.push_back(tensors[k]);
        map[tensors[k].name] = shard_name(i, n);
      }
      write_safetensors(out / shard_name(i, n), part);
    }
    write_json(out / "model.safetensors.index.json", {{"metadata", json::object()}, {"weight_map", map}});
  }
  if (!o.tokenizer_from.empty()) {
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "chat_template.json"}) {
      std::error_code ec;
      if (std::filesystem::exists(o.tokenizer_from / f, ec))
        std::filesystem::copy_file(o.tokenizer_from / f, out / f, std::filesystem::copy_options::overwrite_existing);
    }
  }
}

}  // namespace fs

#include "models/checkpoint_maker.h"

#include <fstream>

#include "core/error.h"
#include "io/hf_config.h"
#include "io/safetensors_writer.h"

namespace fs {

using nlohmann::json;

namespace {

json llama_like(const char* arch, const char* type, int layers, int hidden, int heads, int kv, int ffn, int vocab,
                double theta, bool tied) {
  return {{"architectures", {arch}}, {"model_type", type}, {"num_hidden_layers", layers}, {"hidden_size", hidden},
          {"num_attention_heads", heads}, {"num_key_value_heads", kv}, {"intermediate_size", ffn},
          {"vocab_size", vocab}, {"rope_theta", theta}, {"rms_norm_eps", 1e-5}, {"tie_word_embeddings", tied},
          {"max_position_embeddings", 32768}, {"hidden_act", "silu"}, {"torch_dtype", "bfloat16"},
          {"bos_token_id", 0}, {"eos_token_id", 1}};
}

std::vector<TensorSource> llama_tensors(const ModelConfig& c, DType dt, uint64_t seed, bool qkv_bias, bool qk_norm) {
  const int64_t H = c.hidden_size, Q = int64_t(c.num_heads) * c.head_dim, KV = int64_t(c.num_kv_heads) * c.head_dim;
  const int64_t F = c.intermediate_size, V = c.vocab_size;
  const float w = 0.02f;
  std::vector<TensorSource> t;
  uint64_t s = seed * 1000;
  t.push_back(random_tensor("model.embed_tokens.weight", dt, {V, H}, w, ++s));
  for (int i = 0; i < c.num_layers; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back(random_tensor(p + "input_layernorm.weight", dt, {H}, 0.05f, ++s, 1.0f));
    t.push_back(random_tensor(p + "post_attention_layernorm.weight", dt, {H}, 0.05f, ++s, 1.0f));
    t.push_back(random_tensor(p + "self_attn.q_proj.weight", dt, {Q, H}, w, ++s));
    t.push_back(random_tensor(p + "self_attn.k_proj.weight", dt, {KV, H}, w, ++s));
    t.push_back(random_tensor(p + "self_attn.v_proj.weight", dt, {KV, H}, w, ++s));
    t.push_back(random_tensor(p + "self_attn.o_proj.weight", dt, {H, Q}, w, ++s));
    if (qkv_bias) {
      t.push_back(random_tensor(p + "self_attn.q_proj.bias", dt, {Q}, w, ++s));
      t.push_back(random_tensor(p + "self_attn.k_proj.bias", dt, {KV}, w, ++s));
      t.push_back(random_tensor(p + "self_attn.v_proj.bias", dt, {KV}, w, ++s));
    }
    if (qk_norm) {
      t.push_back(random_tensor(p + "self_attn.q_norm.weight", dt, {c.head_dim}, 0.05f, ++s, 1.0f));
      t.push_back(random_tensor(p + "self_attn.k_norm.weight", dt, {c.head_dim}, 0.05f, ++s, 1.0f));
    }
    t.push_back(random_tensor(p + "mlp.gate_proj.weight", dt, {F, H}, w, ++s));
    t.push_back(random_tensor(p + "mlp.up_proj.weight", dt, {F, H}, w, ++s));
    t.push_back(random_tensor(p + "mlp.down_proj.weight", dt, {H, F}, w, ++s));
  }
  t.push_back(random_tensor("model.norm.weight", dt, {H}, 0.05f, ++s, 1.0f));
  if (!c.tie_word_embeddings) t.push_back(random_tensor("lm_head.weight", dt, {V, H}, w, ++s));
  return t;
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

std::vector<std::string> preset_names() { return {"llama-3-8b", "llama-3.2-1b", "qwen3-8b", "qwen2.5-7b"}; }

json preset_config(const std::string& like) {
  if (like == "llama-3-8b") {
    json c = llama_like("LlamaForCausalLM", "llama", 32, 4096, 32, 8, 14336, 128256, 500000.0, false);
    c["eos_token_id"] = json::array({128001, 128008, 128009});
    c["bos_token_id"] = 128000;
    return c;
  }
  if (like == "llama-3.2-1b") {
    json c = llama_like("LlamaForCausalLM", "llama", 16, 2048, 32, 8, 8192, 128256, 500000.0, true);
    c["head_dim"] = 64;
    c["eos_token_id"] = json::array({128001, 128008, 128009});
    c["bos_token_id"] = 128000;
    return c;
  }
  if (like == "qwen3-8b") {
    json c = llama_like("Qwen3ForCausalLM", "qwen3", 36, 4096, 32, 8, 12288, 151936, 1000000.0, false);
    c["head_dim"] = 128;
    c["eos_token_id"] = 151645;
    return c;
  }
  if (like == "qwen2.5-7b") {
    json c = llama_like("Qwen2ForCausalLM", "qwen2", 28, 3584, 28, 4, 18944, 152064, 1000000.0, false);
    c["eos_token_id"] = 151645;
    return c;
  }
  std::string names;
  for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw Error("unknown --like '" + like + "' (known: " + names + ")");
}

void make_checkpoint(const json& config, const std::filesystem::path& out, const MakeCheckpointOptions& o) {
  ModelConfig c = parse_model_config(config, "config");
  const std::string& a = c.architecture;
  bool qkv_bias = a == "Qwen2ForCausalLM" || c.attention_bias;
  bool qk_norm = a == "Qwen3ForCausalLM";
  if (a != "LlamaForCausalLM" && a != "Qwen2ForCausalLM" && a != "Qwen3ForCausalLM" && a != "MistralForCausalLM")
    throw Error("make-checkpoint writes Llama-family models only, not " + a);
  std::filesystem::create_directories(out);
  auto tensors = llama_tensors(c, o.dtype, o.seed, qkv_bias, qk_norm);
  json cfg = config;
  cfg["torch_dtype"] = o.dtype == DType::BF16 ? "bfloat16" : o.dtype == DType::F16 ? "float16" : "float32";
  write_json(out / "config.json", cfg);
  write_json(out / "generation_config.json", {{"eos_token_id", config.at("eos_token_id")}, {"do_sample", false}});
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

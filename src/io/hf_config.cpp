#include "io/hf_config.h"

#include "core/error.h"
#include "core/files.h"

namespace fs {

namespace {

using nlohmann::json;

struct Fields {
  const json& j;
  const std::string& source;

  Error bad(const std::string& key, const std::string& why) const {
    return Error(source + ": field '" + key + "' " + why);
  }
  bool has(const char* key) const { return j.contains(key) && !j.at(key).is_null(); }
  int integer(const char* key) const {
    if (!has(key)) throw bad(key, "is missing");
    const json& v = j.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (1ll << 31) - 1)
      throw bad(key, "must be a non-negative integer");
    return v.get<int>();
  }
  int integer_or(const char* key, int fallback) const { return has(key) ? integer(key) : fallback; }
  double number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j.at(key);
    if (!v.is_number()) throw bad(key, "must be a number");
    return v.get<double>();
  }
  bool boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j.at(key);
    if (!v.is_boolean()) throw bad(key, "must be true or false");
    return v.get<bool>();
  }
  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const json& v = j.at(key);
    if (!v.is_string()) throw bad(key, "must be a string");
    return v.get<std::string>();
  }
  std::vector<int32_t> ids(const char* key) const {
    std::vector<int32_t> out;
    if (!has(key)) return out;
    const json& v = j.at(key);
    auto one = [&](const json& x) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0) throw bad(key, "must hold non-negative token ids");
      out.push_back(x.get<int32_t>());
    };
    if (v.is_array()) {
      for (const auto& x : v) one(x);
    } else {
      one(v);
    }
    return out;
  }
};

RopeConfig parse_rope(const json& j, const std::string& source) {
  RopeConfig r;
  Fields top{j, source};
  r.theta = top.number_or("rope_theta", r.theta);
  const json* scaling = nullptr;
  if (top.has("rope_parameters")) scaling = &j.at("rope_parameters");
  else if (top.has("rope_scaling")) scaling = &j.at("rope_scaling");
  if (!scaling) return r;
  if (!scaling->is_object()) throw Error(source + ": rope parameters must be an object");
  Fields s{*scaling, source};
  r.theta = s.number_or("rope_theta", r.theta);
  r.type = s.string_or("rope_type", s.string_or("type", "default"));
  if (r.type == "default" && s.has("mrope_section")) r.type = "mrope";
  r.factor = s.number_or("factor", 1.0);
  r.low_freq_factor = s.number_or("low_freq_factor", 1.0);
  r.high_freq_factor = s.number_or("high_freq_factor", 4.0);
  r.original_max_positions = s.integer_or("original_max_position_embeddings", 8192);
  if (s.has("mrope_section")) {
    for (const auto& x : scaling->at("mrope_section")) {
      if (!x.is_number_integer()) throw Error(source + ": mrope_section must hold integers");
      r.mrope_section.push_back(x.get<int>());
    }
  }
  if (r.type != "default" && r.type != "llama3" && r.type != "mrope")
    throw Error(source + ": rope type '" + r.type + "' is not supported");
  return r;
}

}  // namespace

ModelConfig parse_model_config(const json& root, const std::string& source) {
  if (!root.is_object()) throw Error(source + ": config is not a JSON object");
  ModelConfig c;
  Fields top{root, source};
  if (!top.has("architectures") || !root.at("architectures").is_array() || root.at("architectures").empty() ||
      !root.at("architectures")[0].is_string())
    throw Error(source + ": field 'architectures' must be a non-empty list of names");
  c.architecture = root.at("architectures")[0].get<std::string>();
  // Newer multimodal layouts nest the language model's fields in text_config.
  json merged = root;
  if (top.has("text_config")) {
    if (!root.at("text_config").is_object()) throw Error(source + ": field 'text_config' must be an object");
    for (const auto& [k, v] : root.at("text_config").items()) merged[k] = v;
  }
  Fields f{merged, source};
  c.model_type = f.string_or("model_type", "");
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_layers = f.integer("num_hidden_layers");
  c.num_heads = f.integer("num_attention_heads");
  c.num_kv_heads = f.integer_or("num_key_value_heads", c.num_heads);
  for (auto [key, value] : {std::pair{"num_attention_heads", c.num_heads}, {"hidden_size", c.hidden_size},
                             {"vocab_size", c.vocab_size}, {"num_hidden_layers", c.num_layers},
                             {"intermediate_size", c.intermediate_size}})
    if (value <= 0) throw Error(source + ": field '" + key + "' must be positive (sizes must be positive)");
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0)
    throw Error(source + ": num_attention_heads must be a multiple of num_key_value_heads");
  c.head_dim = f.integer_or("head_dim", c.hidden_size / c.num_heads);
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) throw Error(source + ": head_dim must be a positive even number");
  c.max_positions = f.integer_or("max_position_embeddings", 4096);
  c.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6);
  c.rope = parse_rope(merged, source);
  c.tie_word_embeddings = top.boolean_or("tie_word_embeddings", f.boolean_or("tie_word_embeddings", false));
  c.attention_bias = f.boolean_or("attention_bias", false);
  c.hidden_act = f.string_or("hidden_act", "silu");
  c.torch_dtype = f.string_or("torch_dtype", f.string_or("dtype", "bfloat16"));
  c.eos_ids = f.ids("eos_token_id");
  auto bos = f.ids("bos_token_id");
  if (!bos.empty()) c.bos_id = bos[0];
  if (top.has("vision_config")) c.vision = root.at("vision_config");
  c.image_token_id = f.integer_or("image_token_id", -1);
  c.fields = std::move(merged);
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& dir) {
  auto path = dir / "config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error("no config.json in " + dir.string());
  return parse_model_config(read_json_file(path), path.string());
}

GenerationConfig load_generation_config(const std::filesystem::path& dir, const ModelConfig& config) {
  GenerationConfig g;
  g.eos_ids = config.eos_ids;
  g.bos_id = config.bos_id;
  auto path = dir / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return g;
  json j = read_json_file(path);
  if (!j.is_object()) throw Error(path.string() + ": not a JSON object");
  std::string source = path.string();
  Fields f{j, source};
  auto eos = f.ids("eos_token_id");
  if (!eos.empty()) g.eos_ids = eos;
  auto bos = f.ids("bos_token_id");
  if (!bos.empty()) g.bos_id = bos[0];
  g.do_sample = f.boolean_or("do_sample", false);
  if (f.has("temperature")) g.temperature = float(f.number_or("temperature", 1.0));
  if (f.has("top_p")) g.top_p = float(f.number_or("top_p", 1.0));
  if (f.has("top_k")) g.top_k = f.integer("top_k");
  if (f.has("min_p")) g.min_p = float(f.number_or("min_p", 0.0));
  if (f.has("repetition_penalty")) g.repetition_penalty = float(f.number_or("repetition_penalty", 1.0));
  return g;
}

}  // namespace fs

#include "models/qwen3_5_options.h"

#include "core/error.h"
#include "io/safetensors.h"

namespace fs {

namespace {

using nlohmann::json;

int positive(const json& j, const char* key, int fallback, const std::string& family) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (1 << 24))
    throw Error(family + " config: field '" + std::string(key) + "' must be a positive integer");
  return v.get<int>();
}

// transformers' names for legacy layer types (remap_legacy_layer_types).
std::string current_layer_type(std::string type) {
  if (type == "attention") return "full_attention";
  if (type == "mamba") return "linear_attention";
  return type;
}

std::vector<bool> linear_layers_of(const json& j, int layers, const std::string& family) {
  std::vector<bool> linear;
  if (j.contains("layer_types") && !j.at("layer_types").is_null()) {
    const json& types = j.at("layer_types");
    if (!types.is_array() || int(types.size()) != layers)
      throw Error(family + " config: field 'layer_types' must list one type per layer (" + std::to_string(layers) +
                  ")");
    for (const auto& t : types) {
      std::string type = current_layer_type(t.is_string() ? t.get<std::string>() : t.dump());
      if (type == "linear_attention") linear.push_back(true);
      else if (type == "full_attention") linear.push_back(false);
      else throw Error(family + " config: layer type '" + type + "' in 'layer_types' is not supported "
                       "(linear_attention or full_attention)");
    }
    return linear;
  }
  // transformers' default: every full_attention_interval-th layer attends, the others are linear.
  const int interval = positive(j, "full_attention_interval", 4, family);
  for (int i = 0; i < layers; ++i) linear.push_back((i + 1) % interval != 0);
  return linear;
}

// Qwen3.5 text configs name no MoE fields at all.
void refuse_qwen3_5_moe(const json& j) {
  for (const char* moe : {"num_experts", "n_routed_experts", "moe_intermediate_size"})
    if (j.contains(moe) && !j.at(moe).is_null())
      throw Error("Qwen3.5 config: field '" + std::string(moe) + "' asks for mixture-of-experts layers, which "
                  "are not supported");
}

// Qwen3-Next configs always carry the MoE fields; transformers makes layer i a sparse MoE block when i is not in
// mlp_only_layers, num_experts (default 512) > 0 and (i + 1) % decoder_sparse_step (default 1) == 0.
void refuse_qwen3_next_moe(const json& j, int layers) {
  int64_t experts = 512;
  if (j.contains("num_experts") && !j.at("num_experts").is_null()) {
    if (!j.at("num_experts").is_number_integer() || j.at("num_experts").get<int64_t>() < 0)
      throw Error("Qwen3-Next config: field 'num_experts' must be a non-negative integer");
    experts = j.at("num_experts").get<int64_t>();
  }
  if (experts == 0) return;
  std::vector<bool> dense(size_t(layers), false);
  if (j.contains("mlp_only_layers") && !j.at("mlp_only_layers").is_null()) {
    if (!j.at("mlp_only_layers").is_array())
      throw Error("Qwen3-Next config: field 'mlp_only_layers' must list layer indices");
    for (const auto& i : j.at("mlp_only_layers")) {
      if (!i.is_number_integer()) throw Error("Qwen3-Next config: field 'mlp_only_layers' must list layer indices");
      if (i.get<int64_t>() >= 0 && i.get<int64_t>() < layers) dense[size_t(i.get<int64_t>())] = true;
    }
  }
  const int step = positive(j, "decoder_sparse_step", 1, "Qwen3-Next");
  for (int i = 0; i < layers; ++i)
    if (!dense[size_t(i)] && (i + 1) % step == 0)
      throw Error("Qwen3-Next config: layer " + std::to_string(i) + " is a mixture-of-experts layer (num_experts " +
                  std::to_string(experts) + ", decoder_sparse_step " + std::to_string(step) +
                  ", not in mlp_only_layers): MoE layers are not supported");
}

// Multi-token-prediction layers (a drafting head beside the decoder) are not run.
void refuse_mtp(const json& j, const std::string& family) {
  for (const char* key : {"mtp_num_hidden_layers", "num_nextn_predict_layers"})
    if (j.contains(key) && j.at(key).is_number_integer() && j.at(key).get<int64_t>() > 0)
      throw Error(family + " config: field '" + std::string(key) + "' asks for multi-token-prediction (MTP) "
                  "layers, which are not supported");
}

double partial_rotary_factor(const json& j) {
  auto read = [](const json& o) -> std::optional<double> {
    if (!o.is_object() || !o.contains("partial_rotary_factor") || o.at("partial_rotary_factor").is_null())
      return std::nullopt;
    if (!o.at("partial_rotary_factor").is_number())
      throw Error("Qwen3.5 config: field 'partial_rotary_factor' must be a number");
    return o.at("partial_rotary_factor").get<double>();
  };
  if (j.contains("rope_parameters"))
    if (auto f = read(j.at("rope_parameters"))) return *f;
  if (auto f = read(j)) return *f;
  return 0.25;  // transformers' default for this family
}

}  // namespace

bool is_qwen3_next(const ModelConfig& c) { return c.architecture == "Qwen3NextForCausalLM"; }

bool is_qwen3_5(const ModelConfig& c) {
  return c.architecture == "Qwen3_5ForCausalLM" || c.architecture == "Qwen3_5ForConditionalGeneration" ||
         is_qwen3_next(c);
}

int Qwen35Options::attention_layers() const {
  int n = 0;
  for (bool l : linear) n += l ? 0 : 1;
  return n;
}

int Qwen35Options::linear_layers() const { return int(linear.size()) - attention_layers(); }

Qwen35Options qwen3_5_options(const ModelConfig& c, const Checkpoint* ck) {
  const json& j = c.fields;
  const bool next = is_qwen3_next(c);
  const std::string family = next ? "Qwen3-Next" : "Qwen3.5";
  if (next) {
    refuse_qwen3_next_moe(j, c.num_layers);
    refuse_mtp(j, family);
  } else {
    refuse_qwen3_5_moe(j);
  }
  if (c.hidden_act != "silu") throw Error(family + " config: hidden_act '" + c.hidden_act + "' is not supported");
  if (c.attention_bias) throw Error(family + " config: attention_bias true is not supported");
  Qwen35Options o;
  o.packed_projections = next;
  if (ck && ck->has("model.language_model.embed_tokens.weight")) o.prefix = "model.language_model.";
  o.linear = linear_layers_of(j, c.num_layers, family);
  DeltaNetShape& d = o.deltanet;
  d.conv_kernel = positive(j, "linear_conv_kernel_dim", 4, family);
  d.key_dim = positive(j, "linear_key_head_dim", 128, family);
  d.value_dim = positive(j, "linear_value_head_dim", 128, family);
  d.key_heads = positive(j, "linear_num_key_heads", 16, family);
  d.value_heads = positive(j, "linear_num_value_heads", 32, family);
  d.eps = float(c.rms_norm_eps);
  if (d.value_heads % d.key_heads != 0)
    throw Error(family + " config: linear_num_value_heads (" + std::to_string(d.value_heads) +
                ") must be a multiple of linear_num_key_heads (" + std::to_string(d.key_heads) + ")");
  const double factor = partial_rotary_factor(j);
  o.rotary_dim = int(double(c.head_dim) * factor);
  if (factor <= 0 || factor > 1 || o.rotary_dim < 2 || o.rotary_dim % 2 != 0)
    throw Error(family + " config: partial_rotary_factor " + std::to_string(factor) + " gives no even rotary part "
                "of head_dim " + std::to_string(c.head_dim));
  if (c.rope.type != "default" && c.rope.type != "mrope")
    throw Error(family + " config: rope type '" + c.rope.type + "' is not supported");
  if (next) {
    o.mrope_section = {o.rotary_dim / 2, 0, 0};  // plain rotary: every index takes the token's position
    return o;
  }
  o.mrope_section = c.rope.mrope_section.empty() ? std::vector<int>{11, 11, 10} : c.rope.mrope_section;
  if (o.mrope_section.size() != 3) throw Error("Qwen3.5 config: field 'mrope_section' must hold three sections");
  return o;
}

SequenceMemorySpec qwen3_5_memory_spec(const ModelConfig& c) {
  Qwen35Options o = qwen3_5_options(c, nullptr);
  return {.kv_layers = o.attention_layers(),
          .kv_heads = c.num_kv_heads,
          .head_dim = c.head_dim,
          .state_floats = size_t(o.linear_layers()) * o.deltanet.state_floats()};
}

}  // namespace fs

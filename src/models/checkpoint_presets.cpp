// The named presets of make-checkpoint (real models' config.json shapes) and the overrides that shrink them.
#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "models/checkpoint_maker.h"

namespace fs {

using nlohmann::json;

namespace {

struct VisionPreset {
  int depth, hidden, intermediate, heads, out_hidden, patch, merge, temporal, window;
  std::vector<int> fullatt_blocks;
  std::vector<int> mrope_section;  // of the text model's rotary half
};

struct Preset {
  const char* name;
  const char* arch;
  const char* type;
  int layers, hidden, heads, kv, ffn, vocab, head_dim;  // head_dim 0 → not written (hidden / heads)
  double theta, eps;
  bool tied;
  int max_positions, bos;
  std::vector<int> eos;
  const VisionPreset* vision;
};

const VisionPreset kQwen25VlVision{32, 1280, 3420, 16, 3584, 14, 2, 2, 112, {7, 15, 23, 31}, {16, 24, 24}};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = {
      {"llama-3-8b", "LlamaForCausalLM", "llama", 32, 4096, 32, 8, 14336, 128256, 0, 500000.0, 1e-5, false, 32768,
       128000, {128001, 128008, 128009}, nullptr},
      {"llama-3-70b", "LlamaForCausalLM", "llama", 80, 8192, 64, 8, 28672, 128256, 0, 500000.0, 1e-5, false, 32768,
       128000, {128001, 128008, 128009}, nullptr},
      {"llama-3.2-1b", "LlamaForCausalLM", "llama", 16, 2048, 32, 8, 8192, 128256, 64, 500000.0, 1e-5, true, 32768,
       128000, {128001, 128008, 128009}, nullptr},
      {"qwen3-8b", "Qwen3ForCausalLM", "qwen3", 36, 4096, 32, 8, 12288, 151936, 128, 1000000.0, 1e-5, false, 32768,
       0, {151645}, nullptr},
      {"qwen2.5-7b", "Qwen2ForCausalLM", "qwen2", 28, 3584, 28, 4, 18944, 152064, 0, 1000000.0, 1e-5, false, 32768,
       0, {151645}, nullptr},
      {"qwen2.5-vl-7b", "Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl", 28, 3584, 28, 4, 18944, 152064, 0,
       1000000.0, 1e-6, false, 128000, 151643, {151645}, &kQwen25VlVision},
  };
  return table;
}

// The special tokens of Qwen2.5-VL's tokenizer that its config names.
void add_qwen25_vl_fields(json& c, const VisionPreset& v) {
  c["vision_start_token_id"] = 151652;
  c["vision_end_token_id"] = 151653;
  c["vision_token_id"] = 151654;
  c["image_token_id"] = 151655;
  c["video_token_id"] = 151656;
  c["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", v.mrope_section}};
  c["vision_config"] = {{"depth", v.depth}, {"hidden_act", "silu"}, {"hidden_size", v.hidden},
                        {"intermediate_size", v.intermediate}, {"num_heads", v.heads}, {"in_chans", 3},
                        {"out_hidden_size", v.out_hidden}, {"patch_size", v.patch}, {"spatial_patch_size", v.patch},
                        {"spatial_merge_size", v.merge}, {"temporal_patch_size", v.temporal},
                        {"window_size", v.window}, {"fullatt_block_indexes", v.fullatt_blocks},
                        {"tokens_per_second", 2}};
}

// A Qwen3.5 size (Qwen3_5ForConditionalGeneration): the hybrid text model nested in text_config, every fourth layer
// gated full attention and the others Gated DeltaNet, and the Qwen3.5 vision tower.
struct Qwen35Preset {
  const char* name;
  int layers, hidden, heads, kv, ffn;
  int linear_key_heads, linear_value_heads;
  bool tied;
  int vision_depth, vision_hidden, vision_ffn;
};

// Both have the real configs' dimensions (docs/qwen3_5.md, "make-checkpoint presets").
const std::vector<Qwen35Preset>& qwen3_5_presets() {
  static const std::vector<Qwen35Preset> table = {
      {"qwen3.5-27b", 64, 5120, 24, 4, 17408, 16, 48, false, 27, 1152, 4304},
      {"qwen3.5-2b", 24, 2048, 8, 2, 6144, 16, 16, true, 24, 1024, 4096},
  };
  return table;
}

json qwen3_5_config(const Qwen35Preset& p) {
  const int interval = 4;
  json types = json::array();
  for (int i = 0; i < p.layers; ++i)
    types.push_back((i + 1) % interval == 0 ? "full_attention" : "linear_attention");
  json text = {{"model_type", "qwen3_5_text"}, {"num_hidden_layers", p.layers}, {"hidden_size", p.hidden},
               {"num_attention_heads", p.heads}, {"num_key_value_heads", p.kv}, {"head_dim", 256},
               {"intermediate_size", p.ffn}, {"vocab_size", 248320}, {"hidden_act", "silu"},
               {"attention_bias", false}, {"rms_norm_eps", 1e-6}, {"max_position_embeddings", 262144},
               {"tie_word_embeddings", p.tied}, {"eos_token_id", 248044}, {"full_attention_interval", interval},
               {"layer_types", types}, {"linear_conv_kernel_dim", 4}, {"linear_key_head_dim", 128},
               {"linear_value_head_dim", 128}, {"linear_num_key_heads", p.linear_key_heads},
               {"linear_num_value_heads", p.linear_value_heads}, {"partial_rotary_factor", 0.25}};
  text["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000000.0}, {"partial_rotary_factor", 0.25},
                             {"mrope_section", {11, 11, 10}}, {"mrope_interleaved", true}};
  json vision = {{"model_type", "qwen3_5_vision"}, {"depth", p.vision_depth}, {"hidden_size", p.vision_hidden},
                 {"intermediate_size", p.vision_ffn}, {"num_heads", 16}, {"in_channels", 3},
                 {"hidden_act", "gelu_pytorch_tanh"}, {"num_position_embeddings", 2304},
                 {"out_hidden_size", p.hidden}, {"patch_size", 16}, {"spatial_merge_size", 2},
                 {"temporal_patch_size", 2}};
  return {{"architectures", {"Qwen3_5ForConditionalGeneration"}}, {"model_type", "qwen3_5"},
          {"torch_dtype", "bfloat16"}, {"tie_word_embeddings", p.tied}, {"image_token_id", 248056},
          {"video_token_id", 248057}, {"vision_start_token_id", 248053}, {"vision_end_token_id", 248054},
          {"text_config", text}, {"vision_config", vision}};
}

json config_of(const Preset& p) {
  json c = {{"architectures", {p.arch}}, {"model_type", p.type}, {"num_hidden_layers", p.layers},
            {"hidden_size", p.hidden}, {"num_attention_heads", p.heads}, {"num_key_value_heads", p.kv},
            {"intermediate_size", p.ffn}, {"vocab_size", p.vocab}, {"rope_theta", p.theta},
            {"rms_norm_eps", p.eps}, {"tie_word_embeddings", p.tied}, {"max_position_embeddings", p.max_positions},
            {"hidden_act", "silu"}, {"torch_dtype", "bfloat16"}, {"bos_token_id", p.bos}};
  c["eos_token_id"] = p.eos.size() == 1 ? json(p.eos[0]) : json(p.eos);
  if (p.head_dim > 0) c["head_dim"] = p.head_dim;
  if (p.vision) add_qwen25_vl_fields(c, *p.vision);
  return c;
}

int get_int(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_integer()) throw Error(std::string("config has no integer ") + key);
  return j[key].get<int>();
}

void set_if(json& j, const char* key, int value) {
  if (value < 0) throw Error(std::string("override of ") + key + " must be positive");
  if (value > 0) j[key] = value;
}

// The text model's fields: text_config in nested layouts (Qwen3.5), the top level otherwise.
json& text_part(json& c) { return c.contains("text_config") ? c["text_config"] : c; }

// Qwen3.5's hybrid text models have linear-attention (Gated DeltaNet) layers.
bool has_linear_layers(const json& t) { return t.contains("linear_num_value_heads") || t.contains("layer_types"); }

// The share of each attention head that rotates (partial_rotary_factor, 1 when absent).
double rotary_fraction(const json& t) {
  if (t.contains("rope_parameters") && t["rope_parameters"].contains("partial_rotary_factor"))
    return t["rope_parameters"]["partial_rotary_factor"].get<double>();
  return t.value("partial_rotary_factor", 1.0);
}

// Rescales mrope_section to a new rotary half, in proportion: each section's share rounded down, the dims left over
// going one each to the largest remainders (the first on ties).
void rescale_mrope(json& t, int half) {
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!t.contains(key) || !t[key].is_object() || !t[key].contains("mrope_section")) continue;
    auto sections = t[key]["mrope_section"].get<std::vector<int>>();
    const int64_t old = std::accumulate(sections.begin(), sections.end(), int64_t{0});
    if (old == half) continue;
    if (old <= 0) throw Error("mrope_section must have a positive sum");
    std::vector<int64_t> remainder(sections.size());
    int left = half;
    for (size_t i = 0; i < sections.size(); ++i) {
      remainder[i] = int64_t(sections[i]) * half % old;
      sections[i] = int(int64_t(sections[i]) * half / old);
      left -= sections[i];
    }
    for (; left > 0; --left) {
      const size_t i = size_t(std::max_element(remainder.begin(), remainder.end()) - remainder.begin());
      ++sections[i];
      remainder[i] = -1;
    }
    t[key]["mrope_section"] = sections;
  }
}

// Every layer's type again after a layer-count override: every full_attention_interval-th layer attends.
void relayer(json& t) {
  const int layers = get_int(t, "num_hidden_layers"), interval = t.value("full_attention_interval", 4);
  json types = json::array();
  for (int i = 0; i < layers; ++i) types.push_back((i + 1) % interval == 0 ? "full_attention" : "linear_attention");
  t["layer_types"] = types;
}

void apply_linear_overrides(json& t, const ConfigOverrides& o) {
  const bool given = o.linear_key_heads || o.linear_value_heads || o.linear_key_dim || o.linear_value_dim;
  if (!has_linear_layers(t)) {
    if (given) throw Error("linear-attention overrides given for a config without linear-attention layers");
    return;
  }
  set_if(t, "linear_num_key_heads", o.linear_key_heads);
  set_if(t, "linear_num_value_heads", o.linear_value_heads);
  set_if(t, "linear_key_head_dim", o.linear_key_dim);
  set_if(t, "linear_value_head_dim", o.linear_value_dim);
  const int kh = get_int(t, "linear_num_key_heads"), vh = get_int(t, "linear_num_value_heads");
  if (kh <= 0 || vh % kh != 0)
    throw Error("overrides give " + std::to_string(vh) + " linear value heads and " + std::to_string(kh) +
                " linear key heads: key heads must divide value heads");
}

void check_token_ids(const json& config) {
  json c = config;
  if (config.contains("text_config"))
    for (const auto& [k, v] : config["text_config"].items()) c[k] = v;
  const int vocab = get_int(c, "vocab_size");
  for (const char* key : {"bos_token_id", "eos_token_id", "image_token_id", "video_token_id", "vision_start_token_id",
                          "vision_end_token_id", "vision_token_id"}) {
    if (!c.contains(key)) continue;
    json ids = c[key].is_array() ? c[key] : json::array({c[key]});
    for (const auto& id : ids)
      if (id.is_number_integer() && id.get<int64_t>() >= vocab)
        throw Error(std::string(key) + " " + id.dump() + " does not fit a vocabulary of " + std::to_string(vocab));
  }
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : presets()) names.push_back(p.name);
  for (const auto& p : qwen3_5_presets()) names.push_back(p.name);
  return names;
}

json preset_config(const std::string& like) {
  for (const auto& p : presets())
    if (like == p.name) return config_of(p);
  for (const auto& p : qwen3_5_presets())
    if (like == p.name) return qwen3_5_config(p);
  std::string names;
  for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw Error("unknown --like '" + like + "' (known: " + names + ")");
}

void apply_overrides(json& c, const ConfigOverrides& o) {
  json& t = text_part(c);
  set_if(t, "num_hidden_layers", o.layers);
  set_if(t, "hidden_size", o.hidden);
  set_if(t, "num_attention_heads", o.heads);
  set_if(t, "num_key_value_heads", o.kv_heads);
  set_if(t, "intermediate_size", o.intermediate);
  set_if(t, "vocab_size", o.vocab);
  set_if(t, "head_dim", o.head_dim);
  // A hybrid model's head size is its own; elsewhere it follows hidden / heads unless given.
  if ((o.hidden > 0 || o.heads > 0) && o.head_dim == 0 && !has_linear_layers(t)) t.erase("head_dim");
  if (o.layers > 0 && t.contains("layer_types")) relayer(t);
  const int hidden = get_int(t, "hidden_size"), heads = get_int(t, "num_attention_heads");
  const int kv = t.contains("num_key_value_heads") ? get_int(t, "num_key_value_heads") : heads;
  const bool own_head = t.contains("head_dim");
  const int head = own_head ? get_int(t, "head_dim") : heads > 0 ? hidden / heads : 0;
  if (heads <= 0 || kv <= 0 || (!own_head && hidden % heads != 0) || heads % kv != 0 || head <= 0 || head % 2 != 0)
    throw Error("overrides give hidden_size " + std::to_string(hidden) + " with " + std::to_string(heads) +
                " heads and " + std::to_string(kv) + " kv heads: heads must divide hidden into even head sizes "
                "and kv heads must divide heads");
  rescale_mrope(t, int(head * rotary_fraction(t)) / 2);
  apply_linear_overrides(t, o);
  check_token_ids(c);
  const bool vision_override = o.vision_depth || o.vision_hidden || o.vision_heads || o.vision_intermediate;
  if (!c.contains("vision_config")) {
    if (vision_override) throw Error("vision overrides given for a config without vision_config");
    return;
  }
  json& v = c["vision_config"];
  set_if(v, "depth", o.vision_depth);
  set_if(v, "hidden_size", o.vision_hidden);
  set_if(v, "num_heads", o.vision_heads);
  set_if(v, "intermediate_size", o.vision_intermediate);
  v["out_hidden_size"] = hidden;
  const int depth = get_int(v, "depth"), vh = get_int(v, "hidden_size"), vheads = get_int(v, "num_heads");
  if (vheads <= 0 || vh % vheads != 0 || (vh / vheads) % 4 != 0)
    throw Error("overrides give vision hidden_size " + std::to_string(vh) + " with " + std::to_string(vheads) +
                " heads: the head size must be a multiple of 4");
  if (!v.contains("fullatt_block_indexes")) return;
  std::vector<int> full;
  for (int b : v["fullatt_block_indexes"].get<std::vector<int>>())
    if (b < depth) full.push_back(b);
  v["fullatt_block_indexes"] = full;
}

}  // namespace fs

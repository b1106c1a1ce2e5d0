// The named presets of make-checkpoint (real models' config.json shapes) and the overrides that shrink them.
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

// Rescales mrope_section to a new rotary half; throws when the split cannot stay proportional in whole numbers.
void rescale_mrope(json& c, int half) {
  if (!c.contains("rope_scaling") || !c["rope_scaling"].contains("mrope_section")) return;
  auto sections = c["rope_scaling"]["mrope_section"].get<std::vector<int>>();
  const int old = std::accumulate(sections.begin(), sections.end(), 0);
  if (old == half) return;
  for (int& s : sections) {
    if (int64_t(s) * half % old != 0)
      throw Error("mrope_section cannot be rescaled to a head size of " + std::to_string(2 * half));
    s = int(int64_t(s) * half / old);
  }
  c["rope_scaling"]["mrope_section"] = sections;
}

void check_token_ids(const json& c) {
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
  return names;
}

json preset_config(const std::string& like) {
  for (const auto& p : presets())
    if (like == p.name) return config_of(p);
  std::string names;
  for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw Error("unknown --like '" + like + "' (known: " + names + ")");
}

void apply_overrides(json& c, const ConfigOverrides& o) {
  set_if(c, "num_hidden_layers", o.layers);
  set_if(c, "hidden_size", o.hidden);
  set_if(c, "num_attention_heads", o.heads);
  set_if(c, "num_key_value_heads", o.kv_heads);
  set_if(c, "intermediate_size", o.intermediate);
  set_if(c, "vocab_size", o.vocab);
  if (o.hidden > 0 || o.heads > 0) c.erase("head_dim");
  const int hidden = get_int(c, "hidden_size"), heads = get_int(c, "num_attention_heads");
  const int kv = c.contains("num_key_value_heads") ? get_int(c, "num_key_value_heads") : heads;
  if (heads <= 0 || kv <= 0 || hidden % heads != 0 || heads % kv != 0 || (hidden / heads) % 2 != 0)
    throw Error("overrides give hidden_size " + std::to_string(hidden) + " with " + std::to_string(heads) +
                " heads and " + std::to_string(kv) + " kv heads: heads must divide hidden into even head sizes "
                "and kv heads must divide heads");
  if (!c.contains("head_dim")) rescale_mrope(c, hidden / heads / 2);
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
  std::vector<int> full;
  for (int b : v.value("fullatt_block_indexes", std::vector<int>{}))
    if (b < depth) full.push_back(b);
  v["fullatt_block_indexes"] = full;
}

}  // namespace fs

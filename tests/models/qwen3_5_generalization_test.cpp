// The Qwen3.5 forward on shapes the fixtures do not have (more value heads than key heads, key and value head sizes
// that differ, untied head, other rotary fractions and layer patterns) against an independent double-precision
// forward; chunked == whole bit for bit; bad configs refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/files.h"
#include "io/safetensors_writer.h"
#include "models/kv_pool.h"
#include "models/model.h"
#include "qwen3_5_naive_forward.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

json base_config() {
  return {{"architectures", {"Qwen3_5ForCausalLM"}}, {"model_type", "qwen3_5_text"}, {"vocab_size", 97},
          {"hidden_size", 32}, {"intermediate_size", 48}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"head_dim", 16}, {"rms_norm_eps", 1e-6}, {"hidden_act", "silu"}, {"tie_word_embeddings", false},
          {"eos_token_id", 1}};
}

// Writes config.json and random weights (f32, norms near their trained values) for a Qwen3.5 config.
void write_checkpoint(const json& config, const Qwen35NaiveShape& s, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump(1);
  const int64_t H = config["hidden_size"], F = config["intermediate_size"], V = config["vocab_size"];
  const int64_t nh = config["num_attention_heads"], nkv = config["num_key_value_heads"], hd = config["head_dim"];
  const int64_t C = 2 * s.key_heads * s.key_dim + s.value_heads * s.value_dim, VC = s.value_heads * s.value_dim;
  std::vector<TensorSource> t;
  uint64_t seed = 11;
  auto add = [&](std::string name, std::vector<int64_t> shape, float scale, float offset = 0) {
    t.push_back(random_tensor(std::move(name), DType::F32, std::move(shape), scale, seed++, offset));
  };
  add("model.embed_tokens.weight", {V, H}, 0.5f);
  add("model.norm.weight", {H}, 0.1f);
  if (!config["tie_word_embeddings"].get<bool>()) add("lm_head.weight", {V, H}, 0.2f);
  for (size_t i = 0; i < s.linear.size(); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {H}, 0.1f);
    add(p + "post_attention_layernorm.weight", {H}, 0.1f);
    add(p + "mlp.gate_proj.weight", {F, H}, 0.2f);
    add(p + "mlp.up_proj.weight", {F, H}, 0.2f);
    add(p + "mlp.down_proj.weight", {H, F}, 0.2f);
    if (s.linear[i]) {
      add(p + "linear_attn.in_proj_qkv.weight", {C, H}, 0.3f);
      add(p + "linear_attn.in_proj_z.weight", {VC, H}, 0.3f);
      add(p + "linear_attn.in_proj_a.weight", {s.value_heads, H}, 0.3f);
      add(p + "linear_attn.in_proj_b.weight", {s.value_heads, H}, 0.3f);
      add(p + "linear_attn.conv1d.weight", {C, 1, s.conv_kernel}, 0.4f);
      add(p + "linear_attn.A_log", {s.value_heads}, 0.5f, -1.0f);
      add(p + "linear_attn.dt_bias", {s.value_heads}, 0.5f, 0.5f);
      add(p + "linear_attn.norm.weight", {s.value_dim}, 0.1f, 1.0f);
      add(p + "linear_attn.out_proj.weight", {H, VC}, 0.2f);
    } else {
      add(p + "self_attn.q_proj.weight", {2 * nh * hd, H}, 0.3f);
      add(p + "self_attn.k_proj.weight", {nkv * hd, H}, 0.3f);
      add(p + "self_attn.v_proj.weight", {nkv * hd, H}, 0.3f);
      add(p + "self_attn.o_proj.weight", {H, nh * hd}, 0.2f);
      add(p + "self_attn.q_norm.weight", {hd}, 0.1f);
      add(p + "self_attn.k_norm.weight", {hd}, 0.1f);
    }
  }
  write_safetensors(dir / "model.safetensors", t);
}

struct Case {
  const char* name;
  json config;
  Qwen35NaiveShape shape;
};

std::vector<Case> cases() {
  json wide = base_config();  // 4 value heads per key head, untied, half the head rotates, attention first
  wide["num_hidden_layers"] = 4;
  wide["layer_types"] = {"full_attention", "linear_attention", "linear_attention", "full_attention"};
  wide["linear_conv_kernel_dim"] = 4;
  wide["linear_num_key_heads"] = 1;
  wide["linear_num_value_heads"] = 4;
  wide["linear_key_head_dim"] = 8;
  wide["linear_value_head_dim"] = 8;
  wide["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}};
  json interval = base_config();  // no layer_types: every 2nd layer attends; dk ≠ dv; kernel 3; full rotary
  interval["num_hidden_layers"] = 3;
  interval["full_attention_interval"] = 2;
  interval["tie_word_embeddings"] = true;
  interval["linear_conv_kernel_dim"] = 3;
  interval["linear_num_key_heads"] = 2;
  interval["linear_num_value_heads"] = 2;
  interval["linear_key_head_dim"] = 8;
  interval["linear_value_head_dim"] = 12;
  interval["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000.0}, {"partial_rotary_factor", 1.0}};
  return {{"wide-value-heads-untied-half-rotary", wide, {{false, true, true, false}, 1, 4, 8, 8, 4, 8}},
          {"interval-pattern-dk-ne-dv-full-rotary", interval, {{true, false, true}, 2, 2, 8, 12, 3, 16}}};
}

std::vector<float> run_chunks(Model& m, const std::vector<int32_t>& ids, int chunk, bool all_logits) {
  const SequenceMemorySpec spec = m.memory_spec();
  KvPool pool(spec, 16, 4, 1);
  std::vector<int32_t> pages{*pool.allocate(), *pool.allocate(), *pool.allocate(), *pool.allocate()};
  const int32_t slot = *pool.allocate_state();
  std::vector<float> out;
  for (size_t start = 0; start < ids.size(); start += size_t(chunk)) {
    const size_t n = std::min(ids.size() - start, size_t(chunk));
    SequenceChunk c{std::span<const int32_t>(ids.data() + start, n), int(start), pages, all_logits};
    c.state_slot = slot;
    auto l = m.forward(std::span<const SequenceChunk>(&c, 1), pool);
    if (all_logits) out.insert(out.end(), l.begin(), l.end());
    else out = l;
  }
  return out;
}

TEST(Qwen35Generalization, ForwardMatchesAnIndependentDoublePrecisionForward) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    auto dir = std::filesystem::temp_directory_path() / (std::string("fs-q35-") + c.name);
    write_checkpoint(c.config, c.shape, dir);
    ModelConfig cfg = load_model_config(dir);
    auto ck = Checkpoint::open(dir);
    auto model = create_model(cfg, ck);
    const SequenceMemorySpec spec = model->memory_spec();
    int attention = 0;
    for (bool l : c.shape.linear) attention += l ? 0 : 1;
    EXPECT_EQ(spec.kv_layers, attention);
    std::vector<int32_t> ids;
    for (int i = 0; i < 45; ++i) ids.push_back((i * 37 + 11) % cfg.vocab_size);
    auto got = run_chunks(*model, ids, int(ids.size()), true);
    auto want = qwen3_5_naive_forward(cfg, c.shape, *ck, ids);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(rel_l2(got, std::vector<float>(want.begin(), want.end())), 1e-5);
    // A token's arithmetic is the same in a chunk of 1, 7 or all rows.
    auto whole = run_chunks(*model, ids, int(ids.size()), false);
    for (int chunk : {1, 7}) {
      auto chunked = run_chunks(*model, ids, chunk, false);
      ASSERT_EQ(chunked.size(), whole.size());
      EXPECT_EQ(std::memcmp(chunked.data(), whole.data(), whole.size() * sizeof(float)), 0) << "chunk " << chunk;
    }
    std::filesystem::remove_all(dir);
  }
}

void expect_refused(json config, const std::string& needle) {
  try {
    create_model(parse_model_config(config, "config.json"), nullptr);
    ADD_FAILURE() << "accepted a config that should name " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Qwen35Generalization, BadConfigsAreRefusedByName) {
  json c = cases()[0].config;
  json zero_heads = c;
  zero_heads["num_attention_heads"] = 0;
  expect_refused(zero_heads, "num_attention_heads");
  json zero_linear = c;
  zero_linear["linear_num_key_heads"] = 0;
  expect_refused(zero_linear, "linear_num_key_heads");
  json uneven = c;
  uneven["linear_num_key_heads"] = 3;
  expect_refused(uneven, "linear_num_value_heads (4) must be a multiple of linear_num_key_heads (3)");
  json unknown = c;
  unknown["layer_types"][1] = "sliding_attention";
  expect_refused(unknown, "sliding_attention");
  json short_list = c;
  short_list["layer_types"].erase(0);
  expect_refused(short_list, "layer_types");
  json moe = c;
  moe["num_experts"] = 8;
  expect_refused(moe, "num_experts");
}

}  // namespace
}  // namespace fs::test

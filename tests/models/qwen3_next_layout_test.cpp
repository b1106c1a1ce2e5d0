// The Qwen3NextForCausalLM layout: tiny-qwen3.5's weights packed as transformers' Qwen3-Next lays them out
// (in_proj_qkvz and in_proj_ba grouped per key head) under a qwen3_next config give the same logits bit for bit;
// MoE layers and MTP layers are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>

#include "core/error.h"
#include "core/files.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "models/checkpoint_maker.h"
#include "models/kv_pool.h"
#include "models/model.h"
#include "models/qwen3_5_options.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

using Bytes = std::shared_ptr<std::vector<uint8_t>>;

// Every byte of a checkpoint tensor.
Bytes tensor_bytes(const Checkpoint& ck, const std::string& name) {
  const TensorView t = ck.get(name);
  const auto* data = static_cast<const uint8_t*>(t.data);
  return std::make_shared<std::vector<uint8_t>>(data, data + (t.info->end - t.info->begin));
}

TensorSource source(std::string name, DType dtype, std::vector<int64_t> shape, Bytes bytes) {
  return {std::move(name), dtype, std::move(shape),
          [bytes](size_t offset, uint8_t* dst, size_t n) { std::memcpy(dst, bytes->data() + offset, n); }};
}

// Rows [begin, begin + count) of a [rows, cols] tensor appended to `out`.
void append_rows(const TensorView& t, int64_t begin, int64_t count, std::vector<uint8_t>& out) {
  const size_t row = size_t(t.shape()[1]) * dtype_size(t.dtype());
  const auto* data = static_cast<const uint8_t*>(t.data) + size_t(begin) * row;
  out.insert(out.end(), data, data + size_t(count) * row);
}

// The sizes the packing needs, from the Qwen3.5 config.
struct LinearSizes {
  int64_t key_heads, value_heads, key_dim, value_dim;
};

// transformers' Qwen3NextGatedDeltaNet layout: per key head g, in_proj_qkvz holds q_g (key_dim rows), k_g
// (key_dim), v_g (ratio·value_dim: the value heads g·ratio … g·ratio + ratio − 1) and z_g (the same value heads);
// in_proj_ba holds b_g (ratio) then a_g (ratio).
std::vector<TensorSource> packed_layer(const Checkpoint& ck, const std::string& a, const LinearSizes& s) {
  const TensorView qkv = ck.get(a + "in_proj_qkv.weight"), z = ck.get(a + "in_proj_z.weight");
  const TensorView b = ck.get(a + "in_proj_b.weight"), alpha = ck.get(a + "in_proj_a.weight");
  const int64_t ratio = s.value_heads / s.key_heads, K = s.key_heads * s.key_dim, rv = ratio * s.value_dim;
  auto qkvz = std::make_shared<std::vector<uint8_t>>(), ba = std::make_shared<std::vector<uint8_t>>();
  for (int64_t g = 0; g < s.key_heads; ++g) {
    append_rows(qkv, g * s.key_dim, s.key_dim, *qkvz);
    append_rows(qkv, K + g * s.key_dim, s.key_dim, *qkvz);
    append_rows(qkv, 2 * K + g * rv, rv, *qkvz);
    append_rows(z, g * rv, rv, *qkvz);
    append_rows(b, g * ratio, ratio, *ba);
    append_rows(alpha, g * ratio, ratio, *ba);
  }
  const int64_t H = qkv.shape()[1];
  return {source(a + "in_proj_qkvz.weight", qkv.dtype(), {2 * K + 2 * s.value_heads * s.value_dim, H}, qkvz),
          source(a + "in_proj_ba.weight", b.dtype(), {2 * s.value_heads, H}, ba)};
}

// A qwen3_next config.json of the fixture's sizes in Qwen3-Next's field layout: rope_theta and
// partial_rotary_factor at the top level, the layer pattern by full_attention_interval, the MoE fields present but
// every layer dense.
json qwen3_next_config(const json& q) {
  json c = {{"architectures", {"Qwen3NextForCausalLM"}}, {"model_type", "qwen3_next"},
            {"rope_theta", q["rope_parameters"]["rope_theta"]},
            {"partial_rotary_factor", q["rope_parameters"]["partial_rotary_factor"]},
            {"full_attention_interval", 4}, {"num_experts", 0}, {"decoder_sparse_step", 1},
            {"mlp_only_layers", json::array()}, {"moe_intermediate_size", 512},
            {"shared_expert_intermediate_size", 512}, {"num_experts_per_tok", 10}, {"norm_topk_prob", true}};
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act",
                          "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings", "attention_bias",
                          "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim",
                          "linear_num_key_heads", "linear_num_value_heads", "bos_token_id", "eos_token_id",
                          "torch_dtype"})
    c[key] = q.at(key);
  return c;
}

// tiny-qwen3.5 rewritten as a Qwen3-Next checkpoint in `dir`.
void write_qwen3_next(const std::filesystem::path& fixture, const std::filesystem::path& dir) {
  const json q = read_json_file(fixture / "config.json");
  const LinearSizes s{q["linear_num_key_heads"], q["linear_num_value_heads"], q["linear_key_head_dim"],
                      q["linear_value_head_dim"]};
  auto ck = Checkpoint::open(fixture);
  std::vector<TensorSource> tensors;
  for (const std::string& name : ck->names()) {
    const bool projection = name.find("linear_attn.in_proj_") != std::string::npos;
    if (!projection) {
      const TensorView t = ck->get(name);
      tensors.push_back(source(name, t.dtype(), t.shape(), tensor_bytes(*ck, name)));
    } else if (name.ends_with("in_proj_qkv.weight")) {
      const std::string a = name.substr(0, name.size() - std::string("in_proj_qkv.weight").size());
      for (auto& t : packed_layer(*ck, a, s)) tensors.push_back(std::move(t));
    }
  }
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << qwen3_next_config(q).dump(1);
  write_safetensors(dir / "model.safetensors", tensors);
}

// Logits at every position of a short prompt, at the last of a long one.
std::vector<float> prompt_logits(Model& m, const std::vector<int32_t>& ids) {
  KvPool pool(m.memory_spec(), 16, int(ids.size() / 16 + 1), 1);
  std::vector<int32_t> pages;
  for (size_t p = 0; p * 16 < ids.size(); ++p) pages.push_back(*pool.allocate());
  SequenceChunk chunk{ids, 0, pages, ids.size() <= 64};
  chunk.state_slot = *pool.allocate_state();
  return m.forward(std::span<const SequenceChunk>(&chunk, 1), pool);
}

TEST(Qwen3NextLayout, PackedCheckpointGivesTheSameLogitsBitForBit) {
  FS_REQUIRE_SHARED(shared);
  const auto fixture = shared / "models" / "tiny-qwen3.5";
  const auto dir = std::filesystem::temp_directory_path() / "fs-qwen3-next-layout";
  write_qwen3_next(fixture, dir);
  ModelConfig next_config = load_model_config(dir);
  auto next_ck = Checkpoint::open(dir);
  ASSERT_TRUE(next_ck->has("model.layers.0.linear_attn.in_proj_qkvz.weight"));
  ASSERT_FALSE(next_ck->has("model.layers.0.linear_attn.in_proj_qkv.weight"));
  auto next = create_model(next_config, next_ck);
  auto ours = create_model(load_model_config(fixture), Checkpoint::open(fixture));
  EXPECT_EQ(next->memory_spec().kv_layers, ours->memory_spec().kv_layers);
  EXPECT_EQ(next->memory_spec().state_floats, ours->memory_spec().state_floats);
  const json cases = read_json_file(shared / "reference" / "tiny-qwen3.5" / "cases.json")["cases"];
  ASSERT_GE(cases.size(), 3u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const std::vector<float> want = prompt_logits(*ours, ids), got = prompt_logits(*next, ids);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(got.size(), (ids.size() <= 64 ? ids.size() : 1) * size_t(next_config.vocab_size));
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
  }
  std::filesystem::remove_all(dir);
}

// make-checkpoint writes the packed tensors for a qwen3_next config, and the model loads them.
TEST(Qwen3NextLayout, MadeCheckpointLoadsAndGivesFiniteLogits) {
  json c = {{"architectures", {"Qwen3NextForCausalLM"}}, {"model_type", "qwen3_next"}, {"vocab_size", 97},
            {"hidden_size", 32}, {"intermediate_size", 48}, {"num_hidden_layers", 4},
            {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16}, {"num_experts", 0},
            {"linear_num_key_heads", 2}, {"linear_num_value_heads", 4}, {"linear_key_head_dim", 8},
            {"linear_value_head_dim", 4}, {"rope_theta", 10000.0}, {"eos_token_id", 1}};
  const auto dir = std::filesystem::temp_directory_path() / "fs-qwen3-next-made";
  std::filesystem::remove_all(dir);
  make_checkpoint(c, dir, {});
  auto ck = Checkpoint::open(dir);
  EXPECT_EQ(ck->get("model.layers.0.linear_attn.in_proj_qkvz.weight").shape(), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(ck->get("model.layers.0.linear_attn.in_proj_ba.weight").shape(), (std::vector<int64_t>{8, 32}));
  auto model = create_model(load_model_config(dir), ck);
  std::vector<int32_t> ids;
  for (int i = 0; i < 20; ++i) ids.push_back((i * 31 + 5) % 97);
  for (float f : prompt_logits(*model, ids)) ASSERT_TRUE(std::isfinite(f));
  std::filesystem::remove_all(dir);
}

json dense_config() {
  return {{"architectures", {"Qwen3NextForCausalLM"}}, {"model_type", "qwen3_next"}, {"vocab_size", 97},
          {"hidden_size", 32}, {"intermediate_size", 48}, {"num_hidden_layers", 4}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"head_dim", 16}, {"num_experts", 0}};
}

void expect_refused(const json& config, const std::vector<std::string>& needles) {
  try {
    qwen3_5_options(parse_model_config(config, "config.json"), nullptr);
    ADD_FAILURE() << "accepted " << config.dump();
  } catch (const Error& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(Qwen3NextLayout, MoeAndMtpLayersAreRefusedByName) {
  json absent = dense_config();
  absent.erase("num_experts");  // transformers' default is 512 experts on every layer
  expect_refused(absent, {"layer 0", "num_experts 512", "MoE layers are not supported"});
  json every_other = dense_config();
  every_other["num_experts"] = 4;
  every_other["decoder_sparse_step"] = 2;
  expect_refused(every_other, {"layer 1", "decoder_sparse_step 2", "MoE layers are not supported"});
  json one_sparse = dense_config();
  one_sparse["num_experts"] = 4;
  one_sparse["mlp_only_layers"] = {0, 1, 2};
  expect_refused(one_sparse, {"layer 3", "mlp_only_layers", "MoE layers are not supported"});
  json mtp = dense_config();
  mtp["mtp_num_hidden_layers"] = 1;
  expect_refused(mtp, {"mtp_num_hidden_layers", "multi-token-prediction"});
  json bad_step = dense_config();
  bad_step["num_experts"] = 4;
  bad_step["decoder_sparse_step"] = 0;
  expect_refused(bad_step, {"decoder_sparse_step"});
  json uneven = dense_config();
  uneven["linear_num_key_heads"] = 3;
  uneven["linear_num_value_heads"] = 4;
  expect_refused(uneven, {"Qwen3-Next config", "linear_num_value_heads (4)"});
  json unknown = dense_config();
  unknown["layer_types"] = {"linear_attention", "sliding_attention", "linear_attention", "full_attention"};
  expect_refused(unknown, {"sliding_attention"});
}

TEST(Qwen3NextLayout, DenseConfigsAreAccepted) {
  json all_dense = dense_config();
  all_dense["num_experts"] = 4;
  all_dense["mlp_only_layers"] = {0, 1, 2, 3};
  all_dense["mtp_num_hidden_layers"] = 0;
  all_dense["layer_types"] = {"mamba", "linear_attention", "linear_attention", "attention"};  // legacy names
  const Qwen35Options o = qwen3_5_options(parse_model_config(all_dense, "config.json"), nullptr);
  EXPECT_TRUE(o.packed_projections);
  EXPECT_EQ(o.linear, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(o.rotary_dim, 4);  // partial_rotary_factor defaults to 0.25 of head_dim 16
  EXPECT_EQ(o.mrope_section, (std::vector<int>{2, 0, 0}));
  // Qwen3.5 configs still refuse any MoE field.
  json qwen3_5 = dense_config();
  qwen3_5["architectures"] = {"Qwen3_5ForCausalLM"};
  expect_refused(qwen3_5, {"num_experts", "mixture-of-experts"});
}

}  // namespace
}  // namespace fs::test

// make-checkpoint's Qwen3.5 (27B, 2B) and Llama-3-70B presets: full-size shapes that add up to the models' sizes, a
// qwen3.5-27b shrunk to the tiny fixture's sizes with the fixture's tensors and configs, and a shrunk checkpoint
// whose spec list is exactly what the model program reads and which runs to finite logits.
#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/files.h"
#include "io/safetensors.h"
#include "models/checkpoint_maker.h"
#include "models/kv_pool.h"
#include "models/model.h"
#include "models/model_program.h"
#include "models/qwen3_5_options.h"
#include "support/checkpoint_presets.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

using Shape = std::vector<int64_t>;

double parameters(const json& config) {
  double n = 0;
  for (const auto& s : checkpoint_tensor_specs(config)) {
    double e = 1;
    for (int64_t d : s.shape) e *= double(d);
    n += e;
  }
  return n;
}

// Every tensor part the program reads, with its shape.
std::map<std::string, Shape> program_tensors(const ModelProgram& p) {
  std::map<std::string, Shape> out;
  auto add = [&](const std::vector<TensorPart>& parts) {
    for (const auto& t : parts) out[t.name] = t.shape;
  };
  add(p.embed.parts);
  add(p.head.parts);
  add(p.final_norm.parts);
  for (const auto& L : p.layers) {
    add(L.norm.parts);
    add(L.mlp_norm.parts);
    for (const MatrixRef* m : {&L.mlp.gate, &L.mlp.up, &L.mlp.down}) add(m->parts);
    if (L.attention) {
      for (const MatrixRef* m : {&L.attention->qkv, &L.attention->o}) add(m->parts);
      for (const VectorRef* v : {&L.attention->qkv_bias, &L.attention->q_norm, &L.attention->k_norm}) add(v->parts);
    }
    if (L.deltanet) {
      const DeltaNetStep& d = *L.deltanet;
      for (const MatrixRef* m : {&d.in_qkv, &d.in_z, &d.in_a, &d.in_b, &d.out}) add(m->parts);
      for (const VectorRef* v : {&d.conv, &d.a_log, &d.dt_bias, &d.norm}) add(v->parts);
    }
  }
  return out;
}

std::filesystem::path fixture_dir(const std::filesystem::path& shared) {
  return shared / "models" / "tiny-qwen3.5-vl";
}

// The preset at the tiny fixture's sizes; the vocabulary stays (the preset's image token ids need it).
json preset_at_fixture_sizes(const json& fixture) {
  json c = preset_config("qwen3.5-27b");
  const json& t = fixture["text_config"];
  const json& v = fixture["vision_config"];
  ConfigOverrides o;
  o.layers = t["num_hidden_layers"];
  o.hidden = t["hidden_size"];
  o.heads = t["num_attention_heads"];
  o.kv_heads = t["num_key_value_heads"];
  o.head_dim = t["head_dim"];
  o.intermediate = t["intermediate_size"];
  o.linear_key_heads = t["linear_num_key_heads"];
  o.linear_value_heads = t["linear_num_value_heads"];
  o.linear_key_dim = t["linear_key_head_dim"];
  o.linear_value_dim = t["linear_value_head_dim"];
  o.vision_depth = v["depth"];
  o.vision_hidden = v["hidden_size"];
  o.vision_heads = v["num_heads"];
  o.vision_intermediate = v["intermediate_size"];
  apply_overrides(c, o);
  return c;
}

TEST(MakeCheckpointQwen35, FullSizePresetsAddUpToTheirModels) {
  const json c = preset_config("qwen3.5-27b");
  const ModelConfig mc = parse_model_config(c, "preset");
  const Qwen35Options o = qwen3_5_options(mc, nullptr);
  EXPECT_TRUE(is_qwen3_5(mc));
  EXPECT_EQ(o.attention_layers() * 4, mc.num_layers);
  EXPECT_TRUE(o.linear[0] && !o.linear[3]);
  int sections = 0;
  for (int s : o.mrope_section) sections += s;
  EXPECT_EQ(sections, o.rotary_dim / 2);
  EXPECT_FALSE(mc.tie_word_embeddings);
  EXPECT_EQ(c["vision_config"]["out_hidden_size"], mc.hidden_size);
  const double q = parameters(c);
  EXPECT_GT(q, 26.5e9);
  EXPECT_LT(q, 28.0e9);
  const json small = preset_config("qwen3.5-2b");
  const ModelConfig sc = parse_model_config(small, "preset");
  EXPECT_EQ(qwen3_5_options(sc, nullptr).attention_layers() * 4, sc.num_layers);
  EXPECT_TRUE(sc.tie_word_embeddings);
  const double s = parameters(small);
  EXPECT_GT(s, 1.8e9);
  EXPECT_LT(s, 2.6e9);
  const double l = parameters(preset_config("llama-3-70b"));
  EXPECT_GT(l, 70.0e9);
  EXPECT_LT(l, 71.0e9);
  for (const auto& name : preset_names()) EXPECT_NO_THROW(checkpoint_tensor_specs(preset_config(name))) << name;
}

TEST(MakeCheckpointQwen35, ShrunkPresetHasTheFixturesTensorsAndConfigs) {
  FS_REQUIRE_SHARED(shared);
  const json fixture = read_json_file(fixture_dir(shared) / "config.json");
  const json c = preset_at_fixture_sizes(fixture);
  auto ck = Checkpoint::open(fixture_dir(shared));
  auto ours = spec_shapes(c);
  // The fixture ties its head, has a smaller vocabulary and a 16x16 position grid; the preset has the 27B's.
  ASSERT_TRUE(ours.count("lm_head.weight"));
  ours.erase("lm_head.weight");
  ASSERT_EQ(ours.size(), ck->names().size());
  for (const auto& name : ck->names()) {
    ASSERT_TRUE(ours.count(name)) << name;
    Shape want = ck->get(name).shape();
    if (name == "model.language_model.embed_tokens.weight") want[0] = c["text_config"]["vocab_size"];
    if (name == "model.visual.pos_embed.weight") want[0] = c["vision_config"]["num_position_embeddings"];
    EXPECT_EQ(ours[name], want) << name;
  }
  for (const char* key : {"architectures", "model_type"}) EXPECT_EQ(c[key], fixture[key]) << key;
  for (const char* key : {"layer_types", "linear_conv_kernel_dim", "partial_rotary_factor", "rms_norm_eps",
                          "hidden_act", "attention_bias", "model_type"})
    EXPECT_EQ(c["text_config"][key], fixture["text_config"][key]) << key;
  for (const char* key : {"mrope_section", "mrope_interleaved", "partial_rotary_factor", "rope_type"})
    EXPECT_EQ(c["text_config"]["rope_parameters"][key], fixture["text_config"]["rope_parameters"][key]) << key;
  for (const char* key : {"hidden_act", "in_channels", "model_type", "out_hidden_size", "patch_size",
                          "spatial_merge_size", "temporal_patch_size"})
    EXPECT_EQ(c["vision_config"][key], fixture["vision_config"][key]) << key;
  EXPECT_EQ(preprocessor_config_for(c), read_json_file(fixture_dir(shared) / "preprocessor_config.json"));
}

// A small qwen3.5-27b: 8 layers (two of them attention), a 64-wide text model with the preset's vocabulary.
json small_qwen3_5() { return shrunk_qwen3_5(8, 8, 1); }

TEST(MakeCheckpointQwen35, SpecListIsWhatTheProgramReads) {
  const json c = small_qwen3_5();
  const auto dir = std::filesystem::temp_directory_path() / "fs-make-checkpoint-q35-program";
  std::filesystem::remove_all(dir);
  make_checkpoint(c, dir, {});
  auto ck = Checkpoint::open(dir);
  const ModelProgram p = model_program(load_model_config(dir), ck.get());
  auto text = spec_shapes(c);
  for (auto it = text.begin(); it != text.end();)
    it = it->first.rfind("model.visual.", 0) == 0 ? text.erase(it) : std::next(it);
  EXPECT_EQ(program_tensors(p), text);
  EXPECT_EQ(p.layers.size(), 8u);
  std::filesystem::remove_all(dir);
}

TEST(MakeCheckpointQwen35, ShrunkCheckpointLoadsAndGivesFiniteLogits) {
  const json c = small_qwen3_5();
  const auto dir = std::filesystem::temp_directory_path() / "fs-make-checkpoint-q35";
  std::filesystem::remove_all(dir);
  MakeCheckpointOptions mo;
  mo.seed = 7;
  make_checkpoint(c, dir, mo);
  ModelConfig cfg = load_model_config(dir);
  auto model = create_model(cfg, Checkpoint::open(dir));
  const SequenceMemorySpec spec = model->memory_spec();
  EXPECT_EQ(spec.kv_layers, 2);
  KvPool pool(spec, 16, 4, 1);
  std::vector<int32_t> pages{*pool.allocate(), *pool.allocate(), *pool.allocate(), *pool.allocate()};
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back((i * 7919 + 13) % cfg.vocab_size);
  SequenceChunk chunk{ids, 0, pages, true};
  chunk.state_slot = *pool.allocate_state();
  auto logits = model->forward(std::span<const SequenceChunk>(&chunk, 1), pool);
  ASSERT_EQ(logits.size(), ids.size() * size_t(cfg.vocab_size));
  float spread = 0;
  for (float f : logits) {
    ASSERT_TRUE(std::isfinite(f));
    spread = std::max(spread, std::fabs(f - logits[0]));
  }
  EXPECT_GT(spread, 0.0f);
  std::filesystem::remove_all(dir);
}

// bench_gpu --synthetic: a preset's text model (no tower) built with no checkpoint reads exactly the tensors of the
// spec list, so every name it asks a spread for has one.
TEST(MakeCheckpointPresets, ProgramWithoutACheckpointReadsTheTextSpecs) {
  for (const auto& name : preset_names()) {
    SCOPED_TRACE(name);
    json c = preset_config(name);
    ConfigOverrides o;
    o.layers = 8;
    apply_overrides(c, o);
    c.erase("vision_config");
    EXPECT_EQ(program_tensors(model_program(parse_model_config(c, name), nullptr)), spec_shapes(c));
  }
}

TEST(MakeCheckpointQwen35, InconsistentLinearOverridesAreRefused) {
  json c = preset_config("qwen3.5-27b");
  ConfigOverrides heads;
  heads.linear_key_heads = 5;
  EXPECT_THROW(apply_overrides(c, heads), Error);
  json llama = preset_config("llama-3-70b");
  ConfigOverrides linear;
  linear.linear_value_heads = 4;
  EXPECT_THROW(apply_overrides(llama, linear), Error);
  json vocab = preset_config("qwen3.5-27b");
  ConfigOverrides small;
  small.vocab = 1000;
  EXPECT_THROW(apply_overrides(vocab, small), Error);  // the image token ids need the vocabulary
}

}  // namespace
}  // namespace fs::test

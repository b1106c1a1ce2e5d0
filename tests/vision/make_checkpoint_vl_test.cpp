// make-checkpoint's qwen2.5-vl-7b preset: shrunk to the tiny fixture's sizes it has the fixture's tensors and
// configs and loads through the real text and tower loaders; at full size its shapes follow its config.
#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/files.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "models/checkpoint_maker.h"
#include "models/vision_tower_config.h"
#include "support/checkpoint_presets.h"
#include "text/tokenizer.h"
#include "vision/image_processor.h"
#include "vision/multimodal_prompt.h"
#include "vision/qwen2_5_vl_tower.h"
#include "vision_fixtures.h"
#include "vl_harness.h"

namespace fs::test {
namespace {

using Shape = std::vector<int64_t>;

// The preset shrunk to the sizes of the tiny fixture's config.json (vision depth too unless given).
json preset_at_fixture_sizes(const json& fixture, int vision_depth = 0) {
  json c = preset_config("qwen2.5-vl-7b");
  const json& v = fixture["vision_config"];
  ConfigOverrides o;
  o.layers = fixture["num_hidden_layers"];
  o.hidden = fixture["hidden_size"];
  o.heads = fixture["num_attention_heads"];
  o.kv_heads = fixture["num_key_value_heads"];
  o.intermediate = fixture["intermediate_size"];
  o.vocab = fixture["vocab_size"];
  o.vision_depth = vision_depth > 0 ? vision_depth : v["depth"].get<int>();
  o.vision_hidden = v["hidden_size"];
  o.vision_heads = v["num_heads"];
  o.vision_intermediate = v["intermediate_size"];
  apply_overrides(c, o);
  return c;
}

// A smooth deterministic RGB image.
vision::RgbImage test_image(int w, int h, int seed) {
  vision::RgbImage img{w, h, std::vector<uint8_t>(size_t(w) * size_t(h) * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        img.pixels[(size_t(y) * size_t(w) + size_t(x)) * 3 + size_t(c)] = uint8_t((x * (3 + c) + y * 5 + seed * 71) % 256);
  return img;
}

TEST(MakeCheckpointVl, ShrunkPresetHasTheFixturesTensorsAndConfigs) {
  FS_REQUIRE_SHARED(shared);
  const auto fixture_dir = vl_model_dir(shared);
  const json fixture = read_json_file(fixture_dir / "config.json");
  json c = preset_at_fixture_sizes(fixture);
  auto fixture_ck = Checkpoint::open(fixture_dir);
  auto ours = spec_shapes(c);
  // The fixture ties its head; the preset (like the 7B) does not.
  ASSERT_FALSE(fixture["tie_word_embeddings"] == c["tie_word_embeddings"]);
  ASSERT_TRUE(ours.count("lm_head.weight"));
  ours.erase("lm_head.weight");
  ASSERT_EQ(ours.size(), fixture_ck->names().size());
  for (const auto& name : fixture_ck->names()) {
    ASSERT_TRUE(ours.count(name)) << name;
    EXPECT_EQ(ours[name], fixture_ck->get(name).shape()) << name;
  }
  for (const char* key : {"architectures", "model_type", "image_token_id", "video_token_id", "vision_start_token_id",
                          "vision_end_token_id", "vision_token_id", "bos_token_id", "rope_theta", "rms_norm_eps",
                          "rope_scaling", "max_position_embeddings"})
    EXPECT_EQ(c[key], fixture[key]) << key;
  for (const char* key : {"patch_size", "spatial_patch_size", "spatial_merge_size", "temporal_patch_size",
                          "window_size", "in_chans", "out_hidden_size", "hidden_act", "tokens_per_second"})
    EXPECT_EQ(c["vision_config"][key], fixture["vision_config"][key]) << key;
  EXPECT_EQ(preprocessor_config_for(c), read_json_file(fixture_dir / "preprocessor_config.json"));
}

TEST(MakeCheckpointVl, ShrunkCheckpointLoadsAndRunsThroughTheRealLoaders) {
  FS_REQUIRE_SHARED(shared);
  const auto fixture_dir = vl_model_dir(shared);
  // Blocks 0..6 windowed, block 7 full (the preset's first full-attention block).
  json c = preset_at_fixture_sizes(read_json_file(fixture_dir / "config.json"), 8);
  const auto dir = std::filesystem::temp_directory_path() / "fs-make-checkpoint-vl";
  std::filesystem::remove_all(dir);
  MakeCheckpointOptions o;
  o.seed = 5;
  o.tokenizer_from = fixture_dir;
  make_checkpoint(c, dir, o);

  ModelConfig mc = load_model_config(dir);
  auto ck = Checkpoint::open(dir);
  auto tower_config = vision::VisionTowerConfig::from_json(mc.vision, "config.json");
  EXPECT_EQ(tower_config.fullatt_block_indexes, std::vector<int>{7});
  vision::Qwen25VisionTower tower(tower_config, ck);
  auto processor = vision::ImageProcessorConfig::load(dir);
  auto tokenizer = Tokenizer::load(dir);
  auto vt = vision::VisionTokenIds::from(mc, *tokenizer);
  EXPECT_EQ(vt.image_pad, mc.image_token_id);

  // 224×168 → a 16×12 patch grid: 8×6 merged units, four attention windows of at most 4×4 units.
  std::vector<std::vector<float>> features;
  std::vector<vision::ImageGrid> grids;
  for (int seed : {1, 2}) {
    auto px = vision::preprocess_image(test_image(224, 168, seed), processor);
    EXPECT_EQ(px.grid.h, 12);
    EXPECT_EQ(px.grid.w, 16);
    features.push_back(tower.encode(px));
    grids.push_back(px.grid);
    ASSERT_EQ(features.back().size(), size_t(px.grid.patches() / 4) * size_t(mc.hidden_size));
    for (float f : features.back()) ASSERT_TRUE(std::isfinite(f));
  }
  EXPECT_NE(features[0], features[1]);

  const std::string text = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What is this?<|im_end|>\n"
                           "<|im_start|>assistant\n";
  std::vector<float> last[2];
  for (int i = 0; i < 2; ++i) {
    auto prompt = vision::build_multimodal_prompt(text, *tokenizer, std::span(&grids[size_t(i)], 1),
                                                  std::span(&features[size_t(i)], 1), vt);
    VlHarness h(dir, ck);
    last[i] = h.prefill(prompt);
    ASSERT_EQ(last[i].size(), size_t(mc.vocab_size));
    for (float f : last[i]) ASSERT_TRUE(std::isfinite(f));
    EXPECT_EQ(h.greedy(prompt, 3).size(), 3u);
  }
  EXPECT_NE(last[0], last[1]);  // the image's features reach the logits
  std::filesystem::remove_all(dir);
}

TEST(MakeCheckpointVl, FullSizePresetShapesFollowItsConfig) {
  const json c = preset_config("qwen2.5-vl-7b");
  const ModelConfig mc = parse_model_config(c, "preset");
  const auto v = vision::VisionTowerConfig::from_json(mc.vision, "preset");
  EXPECT_EQ(mc.architecture, "Qwen2_5_VLForConditionalGeneration");
  EXPECT_EQ(mc.rope.type, "mrope");
  int sections = 0;
  for (int s : mc.rope.mrope_section) sections += s;
  EXPECT_EQ(sections, mc.head_dim / 2);
  EXPECT_EQ(v.out_hidden_size, mc.hidden_size);
  EXPECT_FALSE(mc.tie_word_embeddings);
  for (int b : v.fullatt_block_indexes) EXPECT_LT(b, v.depth);

  auto shapes = spec_shapes(c);
  const int64_t H = mc.hidden_size, V = mc.vocab_size, KV = int64_t(mc.num_kv_heads) * mc.head_dim;
  const int64_t VH = v.hidden_size, VF = v.intermediate_size, M = VH * v.merge_unit();
  EXPECT_EQ(shapes["model.embed_tokens.weight"], (Shape{V, H}));
  EXPECT_EQ(shapes["lm_head.weight"], (Shape{V, H}));
  EXPECT_EQ(shapes["model.layers.27.self_attn.k_proj.weight"], (Shape{KV, H}));
  EXPECT_EQ(shapes["model.layers.0.self_attn.q_proj.bias"], (Shape{int64_t(mc.num_heads) * mc.head_dim}));
  EXPECT_EQ(shapes["model.layers.0.mlp.down_proj.weight"], (Shape{H, mc.intermediate_size}));
  EXPECT_EQ(shapes["visual.blocks.0.mlp.gate_proj.weight"], (Shape{VF, VH}));
  EXPECT_EQ(shapes["visual.blocks.31.attn.qkv.weight"], (Shape{3 * VH, VH}));
  EXPECT_EQ(shapes["visual.patch_embed.proj.weight"],
            (Shape{VH, v.in_channels, v.temporal_patch_size, v.patch_size, v.patch_size}));
  EXPECT_EQ(shapes["visual.merger.mlp.0.weight"], (Shape{M, M}));
  EXPECT_EQ(shapes["visual.merger.mlp.2.weight"], (Shape{v.out_hidden_size, M}));
  EXPECT_FALSE(shapes.count("model.layers." + std::to_string(mc.num_layers) + ".input_layernorm.weight"));
  EXPECT_FALSE(shapes.count("visual.blocks." + std::to_string(v.depth) + ".norm1.weight"));

  // Every token id the tiny fixture's tokenizer knows fits the preset's vocabulary (so --tokenizer-from works).
  FS_REQUIRE_SHARED(shared);
  json tok = read_json_file(vl_model_dir(shared) / "tokenizer.json");
  int64_t top = 0;
  for (const auto& [k, id] : tok["model"]["vocab"].items()) top = std::max(top, id.get<int64_t>());
  for (const auto& t : tok["added_tokens"]) top = std::max(top, t["id"].get<int64_t>());
  EXPECT_LT(top, V);
}

TEST(MakeCheckpointVl, InconsistentOverridesAreRefusedByName) {
  json c = preset_config("qwen2.5-vl-7b");
  ConfigOverrides heads;
  heads.heads = 5;
  EXPECT_THROW(apply_overrides(c, heads), Error);
  json d = preset_config("qwen2.5-vl-7b");
  ConfigOverrides vocab;
  vocab.vocab = 1000;
  try {
    apply_overrides(d, vocab);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit a vocabulary of 1000"), std::string::npos) << e.what();
  }
  json t = preset_config("qwen2.5-7b");
  ConfigOverrides depth;
  depth.vision_depth = 2;
  EXPECT_THROW(apply_overrides(t, depth), Error);
}

}  // namespace
}  // namespace fs::test

// The Qwen3.5 image path on tiny-qwen3.5-vl against transformers: pixel values bit for bit, the tower's merged
// features, M-RoPE positions and rope_delta, and the text model's logits and greedy ids fed by our own tower.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "models/vision_position_grid.h"
#include "text/tokenizer.h"
#include "vision/decoders.h"
#include "vision/image_processor.h"
#include "vision/multimodal_prompt.h"
#include "vision/qwen3_5_vision_tower.h"
#include "vision/vision_encoder.h"
#include "vision_fixtures.h"
#include "vl_harness.h"

namespace fs::vision {
namespace {

std::filesystem::path model_dir(const std::filesystem::path& shared) { return shared / "models" / "tiny-qwen3.5-vl"; }
std::filesystem::path ref_dir(const std::filesystem::path& shared) { return shared / "reference" / "tiny-qwen3.5-vl"; }

struct Qwen35Fixture {
  std::filesystem::path shared, dir;
  json cases;
  std::shared_ptr<Checkpoint> ck;
  ModelConfig config;
  VisionTowerConfig tower_config;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Qwen35VisionTower> tower;
  ImageProcessorConfig processor;
  VisionTokenIds vt;

  explicit Qwen35Fixture(const std::filesystem::path& s) : shared(s), dir(model_dir(s)) {
    cases = read_json_file(ref_dir(s) / "cases.json");
    ck = Checkpoint::open(dir);
    config = load_model_config(dir);
    tower_config = VisionTowerConfig::from_json(config.vision, dir.string());
    tok = Tokenizer::load(dir);
    tower = std::make_unique<Qwen35VisionTower>(tower_config, ck);
    processor = ImageProcessorConfig::load(dir, family_image_backend(config.architecture));
    vt = VisionTokenIds::from(config, *tok);
  }

  PixelPatches preprocess(const std::string& file) const {
    return preprocess_image(decode_image(test::file_bytes(shared / "images" / file)), processor);
  }

  // The reference's pixel values of one image of cases.json.
  PixelPatches reference_pixels(const json& im) const {
    PixelPatches px;
    px.grid = {im["grid_thw"][0].get<int>(), im["grid_thw"][1].get<int>(), im["grid_thw"][2].get<int>()};
    px.patch_dim = im["pixel_values"]["shape"][1].get<int>();
    px.values = test::read_f32(ref_dir(shared) / im["pixel_values"]["file"].get<std::string>());
    return px;
  }

  const json& image_case(const std::string& file) const {
    for (const auto& im : cases["images"])
      if (im["file"] == file) return im;
    throw Error("no reference image " + file);
  }
};

// Image files of a prompt's messages, in order.
std::vector<std::string> prompt_images(const json& prompt) {
  std::vector<std::string> out;
  for (const auto& m : prompt["messages"])
    if (m["content"].is_array())
      for (const auto& part : m["content"])
        if (part["type"] == "image") out.push_back(part["image"]);
  return out;
}

TEST(Qwen35Vision, ConfigNamesTheTower) {
  FS_REQUIRE_SHARED(shared);
  Qwen35Fixture fx(shared);
  EXPECT_EQ(fx.tower_config.kind, VisionTowerKind::Qwen3_5);
  EXPECT_EQ(fx.tower_config.patch_size, fx.processor.patch_size);
  for (int b = 0; b < fx.tower_config.depth; ++b) EXPECT_TRUE(fx.tower_config.full_attention(b));
  json bad = fx.config.vision;
  bad["num_position_embeddings"] = 250;
  EXPECT_THROW(VisionTowerConfig::from_json(bad, "bad"), Error);
  bad = fx.config.vision;
  bad["hidden_act"] = "relu";
  EXPECT_THROW(VisionTowerConfig::from_json(bad, "bad"), Error);
  bad = fx.config.vision;
  bad["rope_parameters"]["rope_type"] = "default";
  EXPECT_THROW(VisionTowerConfig::from_json(bad, "bad"), Error);
}

TEST(Qwen35Vision, PixelValuesEqualTheReferenceBitForBit) {
  FS_REQUIRE_SHARED(shared);
  Qwen35Fixture fx(shared);
  ASSERT_FALSE(fx.cases["images"].empty());
  for (const auto& im : fx.cases["images"]) {
    SCOPED_TRACE(im["file"].get<std::string>());
    const PixelPatches want = fx.reference_pixels(im);
    const PixelPatches got = fx.preprocess(im["file"]);
    EXPECT_EQ(got.grid.t, want.grid.t);
    EXPECT_EQ(got.grid.h, want.grid.h);
    EXPECT_EQ(got.grid.w, want.grid.w);
    ASSERT_EQ(got.patch_dim, want.patch_dim);
    ASSERT_EQ(got.values.size(), want.values.size());
    size_t differing = 0;
    float worst = 0;
    for (size_t i = 0; i < got.values.size(); ++i)
      if (std::memcmp(&got.values[i], &want.values[i], sizeof(float))) {
        ++differing;
        worst = std::max(worst, std::fabs(got.values[i] - want.values[i]));
      }
    EXPECT_EQ(differing, 0u) << "values differ, by at most " << worst;
  }
}

// The torchvision backend's resize and fused normalisation, checked on four more images: tiny-qwen2.5-vl's reference
// also holds what its torchvision processor gave.
TEST(Qwen35Vision, TorchvisionBackendEqualsTheFastReferenceOfQwen25VL) {
  FS_REQUIRE_SHARED(shared);
  const auto config = ImageProcessorConfig::load(test::vl_model_dir(shared), ImageBackend::Torchvision);
  const json cases = test::vl_cases(shared);
  ASSERT_FALSE(cases["images"].empty());
  for (const auto& im : cases["images"]) {
    SCOPED_TRACE(im["file"].get<std::string>());
    const std::string file = im["file"];
    const PixelPatches got = preprocess_image(decode_image(test::file_bytes(shared / "images" / file)), config);
    const std::string fast = im["fast"]["pixel_values"]["file"];
    const auto want = test::read_f32(test::vl_reference_dir(shared) / fast);
    ASSERT_EQ(got.values.size(), want.size());
    size_t differing = 0;
    for (size_t i = 0; i < want.size(); ++i) differing += std::memcmp(&got.values[i], &want[i], sizeof(float)) != 0;
    EXPECT_EQ(differing, 0u);
  }
}

TEST(Qwen35Vision, TowerOutputMatchesTheReference) {
  FS_REQUIRE_SHARED(shared);
  Qwen35Fixture fx(shared);
  for (const auto& im : fx.cases["images"]) {
    const std::string file = im["file"];
    SCOPED_TRACE(file);
    const PixelPatches px = fx.reference_pixels(im);
    const auto ref = test::read_f32(ref_dir(shared) / im["tower_output"]["file"].get<std::string>());
    const auto out = fx.tower->encode(px);
    ASSERT_EQ(out.size(), ref.size());
    const double err = test::rel_l2(out, ref), err_tf32 = test::rel_l2(fx.tower->encode(test::tf32_rounded(px)), ref);
    std::printf("%s: tower rel L2 %.3g (fp32 patch embedding), %.3g (TF32-rounded pixels)\n", file.c_str(), err,
                err_tf32);
    // As for Qwen2.5-VL (docs/vision.md): the reference's Conv3d ran with TF32 inputs on cuDNN; rounding the pixels
    // the same way reproduces it, and the exact fp32 path stays within the fixtures' fp32-CPU bound.
    EXPECT_LE(err_tf32, 1e-4);
    EXPECT_LE(err, 1e-3);
  }
}

TEST(Qwen35Vision, TowerRefusesMismatchedPatchesAndStopsWhenCancelled) {
  FS_REQUIRE_SHARED(shared);
  Qwen35Fixture fx(shared);
  PixelPatches px;
  px.grid = {1, 4, 4};
  px.patch_dim = 100;
  px.values.assign(16 * 100, 0.0f);
  EXPECT_THROW(fx.tower->encode(px), Error);
  px.grid = {1, 3, 4};
  px.patch_dim = fx.tower_config.patch_dim();
  px.values.assign(size_t(12 * px.patch_dim), 0.0f);
  EXPECT_THROW(fx.tower->encode(px), Error);
  px.grid = {1, 4, 4};
  px.values.assign(size_t(16 * px.patch_dim), 0.5f);
  CancelFlag cancel{true};
  EXPECT_THROW(fx.tower->encode(px, &cancel), EncodeCancelled);
}

TEST(Qwen35Vision, PositionGridTapsAlignTheCorners) {
  // A 4-patch axis on a 16-point grid: patch 0 reads point 0 alone, patch 3 point 15 alone, patch 1 point 5.
  const PositionTaps taps = position_grid_taps(ImageGrid{1, 4, 4}, 16, 2);
  ASSERT_EQ(taps.index.size(), 64u);
  for (size_t p = 0; p < 16; ++p) {
    float sum = 0;
    for (size_t k = 0; k < 4; ++k) sum += taps.weight[p * 4 + k];
    EXPECT_NEAR(sum, 1.0f, 1e-6f) << p;
  }
  EXPECT_EQ(taps.index[0], 0);
  EXPECT_EQ(taps.weight[0], 1.0f);
  // The last patch in merge-block order is row 3, column 3: grid point (15, 15).
  EXPECT_EQ(taps.index[15 * 4], 15 * 16 + 15);
  EXPECT_EQ(taps.weight[15 * 4], 1.0f);
  // Patch 1 in merge-block order is row 0, column 1: source column 5.0 exactly.
  EXPECT_EQ(taps.index[1 * 4], 5);
  EXPECT_EQ(taps.weight[1 * 4], 1.0f);
}

TEST(Qwen35Vision, PromptIdsPositionsLogitsAndGreedyMatchTheReference) {
  FS_REQUIRE_SHARED(shared);
  Qwen35Fixture fx(shared);
  ASSERT_FALSE(fx.cases["prompts"].empty());
  for (const auto& pr : fx.cases["prompts"]) {
    const std::string name = pr["name"];
    SCOPED_TRACE(name);
    for (bool tf32 : {true, false}) {
      std::vector<ImageGrid> grids;
      std::vector<std::vector<float>> feats;
      for (const std::string& file : prompt_images(pr)) {
        PixelPatches px = fx.preprocess(file);
        grids.push_back(px.grid);
        feats.push_back(fx.tower->encode(tf32 ? test::tf32_rounded(px) : px));
      }
      MultimodalPrompt p = build_multimodal_prompt(pr["text"], *fx.tok, grids, feats, fx.vt);
      EXPECT_EQ(p.ids, pr["ids"].get<std::vector<int32_t>>());
      const auto& thw = pr["position_ids_thw"];
      ASSERT_EQ(p.mrope_positions.size(), p.ids.size() * 3);
      for (size_t i = 0; i < p.ids.size(); ++i)
        for (int s = 0; s < 3; ++s) ASSERT_EQ(p.mrope_positions[i * 3 + size_t(s)], thw[size_t(s)][i].get<int>()) << i;
      EXPECT_EQ(p.rope_delta, pr["rope_delta"].get<int>());

      test::VlHarness h(fx.dir, fx.ck);
      const auto logits = h.prefill(p);
      const std::string ref_file = pr["last_logits"]["file"];
      const double err = test::rel_l2(logits, test::read_f32(ref_dir(shared) / ref_file));
      std::printf("%s (%s tower input): last_logits rel L2 %.3g\n", name.c_str(), tf32 ? "TF32-rounded" : "fp32", err);
      EXPECT_LE(err, tf32 ? 1e-4 : 1e-3);

      const auto want = pr["greedy"].get<std::vector<int32_t>>();
      const auto margins = pr["greedy_margins"].get<std::vector<double>>();
      test::VlHarness fresh(fx.dir, fx.ck);
      const auto got = fresh.greedy(p, int(want.size()));
      size_t n = 0;  // compare up to the first near-tie
      while (n < want.size() && margins[n] >= 1e-2) ++n;
      EXPECT_GE(n, 1u);
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;
    }
  }
}

TEST(Qwen35Vision, TextOnlyPromptGivesTheTextModelsLogitsBitForBit) {
  FS_REQUIRE_SHARED(shared);
  Qwen35Fixture fx(shared);
  const std::string text = fx.cases["prompts"][0]["text"];
  const std::string plain = text.substr(0, text.find("<|vision_start|>")) + "Hello there.<|im_end|>\n";
  MultimodalPrompt p = build_multimodal_prompt(plain, *fx.tok, {}, {}, fx.vt);
  EXPECT_EQ(p.rope_delta, 0);
  test::VlHarness with_positions(fx.dir, fx.ck), without(fx.dir, fx.ck);
  const auto a = with_positions.prefill(p);
  MultimodalPrompt bare;
  bare.ids = p.ids;
  const auto b = without.prefill(bare);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(Qwen35Vision, CpuEncoderRunsTheQwen35TowerAndCountsImages) {
  FS_REQUIRE_SHARED(shared);
  Qwen35Fixture fx(shared);
  VisionEncoderOptions o;
  o.device = "cpu";
  auto enc = create_cpu_vision_encoder(fx.tower_config, fx.ck, o);
  const PixelPatches px = fx.preprocess("grid224x168.png");
  EXPECT_EQ(enc->encode(px), fx.tower->encode(px));
  EXPECT_EQ(enc->stats().images, 1u);
  EXPECT_GT(enc->weight_bytes(), 0u);
}

}  // namespace
}  // namespace fs::vision

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "text/tokenizer.h"
#include "vision/image_processor.h"
#include "vision/multimodal_prompt.h"
#include "vision/qwen2_5_vl_tower.h"
#include "vision_fixtures.h"
#include "vl_harness.h"

namespace fs::vision {
namespace {

struct Fixture {
  std::filesystem::path shared, model_dir;
  json cases;
  std::shared_ptr<Checkpoint> ck;
  ModelConfig config;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Qwen25VisionTower> tower;
  ImageProcessorConfig processor;
  VisionTokenIds vt;

  explicit Fixture(const std::filesystem::path& s) : shared(s), model_dir(test::vl_model_dir(s)) {
    cases = test::vl_cases(s);
    ck = Checkpoint::open(model_dir);
    config = load_model_config(model_dir);
    tok = Tokenizer::load(model_dir);
    tower = std::make_unique<Qwen25VisionTower>(VisionTowerConfig::from_json(config.vision, "vl"), ck);
    processor = ImageProcessorConfig::load(model_dir);
    vt = VisionTokenIds::from(config, *tok);
  }

  // The real path: decode → preprocess → tower, for each image of a prompt's messages in order.
  void images_of(const json& prompt, bool tf32, std::vector<ImageGrid>& grids, std::vector<std::vector<float>>& feats) {
    for (const auto& m : prompt["messages"]) {
      if (!m["content"].is_array()) continue;
      for (const auto& part : m["content"]) {
        if (part["type"] != "image") continue;
        auto px = preprocess_image(decode_image(test::file_bytes(shared / "images" / part["image"].get<std::string>())),
                                   processor);
        grids.push_back(px.grid);
        feats.push_back(tower->encode(tf32 ? test::tf32_rounded(px) : px));
      }
    }
  }
};

std::vector<int32_t> ints(const json& j) { return j.get<std::vector<int32_t>>(); }

TEST(MultimodalPrompt, MatchesReferenceIdsPositionsLogitsAndGreedy) {
  FS_REQUIRE_SHARED(shared);
  Fixture fx(shared);
  for (const auto& pr : fx.cases["prompts"]) {
    const std::string name = pr["name"];
    SCOPED_TRACE(name);
    for (bool tf32 : {true, false}) {
      std::vector<ImageGrid> grids;
      std::vector<std::vector<float>> feats;
      fx.images_of(pr, tf32, grids, feats);
      MultimodalPrompt p = build_multimodal_prompt(pr["text"], *fx.tok, grids, feats, fx.vt);
      EXPECT_EQ(p.ids, ints(pr["ids"]));
      const auto& thw = pr["position_ids_thw"];
      ASSERT_EQ(p.mrope_positions.size(), p.ids.size() * 3);
      for (size_t i = 0; i < p.ids.size(); ++i)
        for (int s = 0; s < 3; ++s) ASSERT_EQ(p.mrope_positions[i * 3 + size_t(s)], thw[size_t(s)][i].get<int>()) << i;
      EXPECT_EQ(p.rope_delta, pr["rope_delta"].get<int>());

      test::VlHarness h(fx.model_dir, fx.ck);
      auto logits = h.prefill(p);
      auto ref = test::read_f32(test::vl_reference_dir(shared) / pr["last_logits"]["file"].get<std::string>());
      double err = test::rel_l2(logits, ref);
      std::printf("%s (%s tower input): last_logits rel L2 %.3g\n", name.c_str(), tf32 ? "TF32-rounded" : "fp32", err);
      EXPECT_LE(err, tf32 ? 1e-4 : 1e-3);

      auto want = ints(pr["greedy"]);
      auto margins = pr["greedy_margins"].get<std::vector<double>>();
      auto got = h.greedy(p, int(want.size()));
      // Compare up to the first near-tie, where a correct engine may take the other token.
      size_t n = 0;
      while (n < want.size() && margins[n] >= 1e-3) ++n;
      EXPECT_GE(n, 1u);
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;
    }
  }
}

TEST(MultimodalPrompt, RefusesPlaceholderImageMismatch) {
  VisionTokenIds vt;
  vt.image_pad = 7;
  std::vector<int32_t> ids{1, 7, 2, 7, 3};
  std::vector<ImageGrid> one{{1, 4, 4}};
  EXPECT_THROW(expand_image_pads(ids, one, vt), Error);
  std::vector<ImageGrid> three{{1, 4, 4}, {1, 4, 4}, {1, 4, 4}};
  EXPECT_THROW(expand_image_pads(ids, three, vt), Error);
  std::vector<ImageGrid> odd{{1, 3, 4}, {1, 4, 4}};
  EXPECT_THROW(expand_image_pads(ids, odd, vt), Error);
}

}  // namespace
}  // namespace fs::vision

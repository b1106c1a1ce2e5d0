// The tower programs of tiny-qwen2.5-vl and tiny-qwen3.5-vl: every tensor they name is in the checkpoint with
// that shape, every tower tensor of the checkpoint is named, their conventions are the family's, and an image's
// pass holds the window plan (Qwen2.5-VL) or the frames, rotary angles and grid taps of the image (Qwen3.5).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "models/vision_program.h"
#include "models/vision_program_pass.h"
#include "models/window_plan.h"
#include "models/vision_position_grid.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

struct Tower {
  std::shared_ptr<Checkpoint> checkpoint;
  vision::VisionTowerConfig config;
  VisionProgram program;
};

Tower load_tower(const std::filesystem::path& dir) {
  Tower t;
  t.checkpoint = Checkpoint::open(dir);
  t.config = vision::VisionTowerConfig::from_json(load_model_config(dir).vision, dir.string());
  t.program = vision_program(t.config, *t.checkpoint);
  return t;
}

std::vector<TensorPart> parts_of(const VisionProgram& v) {
  std::vector<TensorPart> parts{v.patch_embed};
  auto add = [&parts](const std::vector<TensorPart>& p) { parts.insert(parts.end(), p.begin(), p.end()); };
  add(v.patch_bias.parts);
  add(v.position_grid.parts);
  for (const VisionBlockProgram& b : v.blocks) {
    for (const VisionNormRef* n : {&b.norm1, &b.norm2}) add(n->weight.parts), add(n->bias.parts);
    for (const MatrixRef* m : {&b.qkv, &b.proj, &b.mlp_in, &b.mlp_out}) add(m->parts);
    for (const VectorRef* r : {&b.qkv_bias, &b.proj_bias, &b.mlp_in_bias, &b.mlp_out_bias}) add(r->parts);
  }
  add(v.merger.norm.weight.parts);
  add(v.merger.norm.bias.parts);
  add(v.merger.fc1.parts);
  add(v.merger.fc2.parts);
  add(v.merger.fc1_bias.parts);
  add(v.merger.fc2_bias.parts);
  return parts;
}

void expect_program_names_the_tower(const Tower& t) {
  std::set<std::string> named;
  for (const TensorPart& p : parts_of(t.program)) {
    SCOPED_TRACE(p.name);
    ASSERT_TRUE(t.checkpoint->has(p.name));
    EXPECT_EQ(t.checkpoint->get(p.name).shape(), p.shape);
    EXPECT_TRUE(named.insert(p.name).second) << "named twice";
  }
  for (const std::string& name : t.checkpoint->names())
    if (name.rfind(t.program.prefix, 0) == 0) {
      EXPECT_TRUE(named.count(name)) << name << " is not in the program";
    }
  EXPECT_EQ(int(t.program.blocks.size()), t.config.depth);
}

// The program's norm, MLP, position scheme, windowing and whether the patch embedding has a bias.
void expect_program_kinds(const VisionProgram& v, VisionNorm norm, VisionMlp mlp, VisionPositions positions,
                          bool windows, bool patch_bias) {
  EXPECT_EQ(v.norm, norm);
  EXPECT_EQ(v.mlp, mlp);
  EXPECT_EQ(v.positions, positions);
  EXPECT_EQ(v.windows, windows);
  EXPECT_EQ(!v.patch_bias.empty(), patch_bias);
}

TEST(VisionProgram, Qwen25VlNamesEveryTowerTensorAndWindowsItsTokens) {
  FS_REQUIRE_SHARED(shared);
  const Tower t = load_tower(shared / "models" / "tiny-qwen2.5-vl");
  expect_program_names_the_tower(t);
  const VisionProgram& v = t.program;
  expect_program_kinds(v, VisionNorm::Rms, VisionMlp::SwiGlu, VisionPositions::Rotary, true, false);
  for (int b = 0; b < t.config.depth; ++b) EXPECT_EQ(v.blocks[size_t(b)].full_attention, t.config.full_attention(b));
  EXPECT_EQ(v.blocks.front().mlp_in.rows(), 2 * t.config.intermediate_size);

  const vision::ImageGrid grid{1, 12, 16};
  const VisionPass pass = vision_pass(v, grid);
  const vision::WindowPlan plan = vision::plan_windows(grid, t.config);
  EXPECT_EQ(pass.tokens, plan.tokens);
  EXPECT_EQ(pass.window_index, plan.window_index);
  EXPECT_EQ(pass.window_bounds, plan.window_bounds);
  EXPECT_EQ(pass.frame_bounds, plan.frame_bounds);
  EXPECT_EQ(pass.cos, plan.cos);
  EXPECT_EQ(pass.sin, plan.sin);
  EXPECT_TRUE(pass.taps.index.empty());
}

TEST(VisionProgram, Qwen35NamesEveryTowerTensorAndResamplesItsPositionGrid) {
  FS_REQUIRE_SHARED(shared);
  const Tower t = load_tower(shared / "models" / "tiny-qwen3.5-vl");
  expect_program_names_the_tower(t);
  const VisionProgram& v = t.program;
  expect_program_kinds(v, VisionNorm::LayerNorm, t.config.tanh_gelu ? VisionMlp::GeluTanh : VisionMlp::GeluErf,
                       VisionPositions::LearnedGridAndRotary, false, true);
  for (const VisionBlockProgram& b : v.blocks) EXPECT_TRUE(b.full_attention);

  const vision::ImageGrid grid{2, 10, 14};
  const VisionPass pass = vision_pass(v, grid);
  const std::vector<float> angles =
      vision::axial_rotary_angles(grid, t.config.head_dim(), t.config.rope_theta, t.config.spatial_merge_size);
  const vision::PositionTaps taps =
      vision::position_grid_taps(grid, t.config.position_grid_side(), t.config.spatial_merge_size);
  EXPECT_EQ(pass.tokens, 2 * 10 * 14);
  EXPECT_TRUE(pass.window_index.empty());
  EXPECT_EQ(pass.frame_bounds, (std::vector<int>{0, 140, 280}));
  ASSERT_EQ(pass.cos.size(), angles.size());
  ASSERT_EQ(pass.sin.size(), angles.size());
  for (size_t i = 0; i < angles.size(); ++i) {
    EXPECT_EQ(pass.cos[i], std::cos(angles[i]));
    EXPECT_EQ(pass.sin[i], std::sin(angles[i]));
  }
  EXPECT_EQ(pass.taps.index, taps.index);
  EXPECT_EQ(pass.taps.weight, taps.weight);
  EXPECT_EQ(pass.taps.index.size(), size_t(pass.tokens) * 4);
}

}  // namespace
}  // namespace fs::test

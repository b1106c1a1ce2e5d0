#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "vision/image_processor.h"
#include "vision_fixtures.h"

namespace fs::vision {
namespace {

using test::file_bytes;

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

// PIL's bicubic is reproduced in its fixed-point arithmetic, so resized images match the slow processor as
// exactly as unresized ones; the bound only absorbs a one-ulp difference in the float32 normalisation.
constexpr double kTolerance = 1e-6;

TEST(Preprocess, MatchesReferencePixelValues) {
  FS_REQUIRE_SHARED(shared);
  auto config = ImageProcessorConfig::load(test::vl_model_dir(shared));
  auto cases = test::vl_cases(shared);
  for (const auto& im : cases["images"]) {
    std::string file = im["file"];
    SCOPED_TRACE(file);
    RgbImage img = decode_image(file_bytes(shared / "images" / file));
    EXPECT_EQ(img.width, im["size"][0].get<int>());
    EXPECT_EQ(img.height, im["size"][1].get<int>());
    PixelPatches p = preprocess_image(img, config);
    const auto& slow = im["slow"];
    EXPECT_EQ(p.grid.t, slow["grid_thw"][0].get<int>());
    EXPECT_EQ(p.grid.h, slow["grid_thw"][1].get<int>());
    EXPECT_EQ(p.grid.w, slow["grid_thw"][2].get<int>());
    auto ref = test::read_f32(test::vl_reference_dir(shared) / slow["pixel_values"]["file"].get<std::string>());
    auto fast = test::read_f32(test::vl_reference_dir(shared) / im["fast"]["pixel_values"]["file"].get<std::string>());
    ASSERT_EQ(p.values.size(), ref.size());
    double err = max_abs_diff(p.values, ref), err_fast = max_abs_diff(p.values, fast);
    size_t exact = 0;
    for (size_t i = 0; i < ref.size(); ++i) exact += p.values[i] == ref[i];
    std::printf("%s: max |ours - slow| %.3g, max |ours - fast| %.3g, rel L2 vs slow %.3g, equal %.4f\n",
                file.c_str(), err, err_fast, test::rel_l2(p.values, ref), double(exact) / double(ref.size()));
    EXPECT_LE(err, kTolerance);
  }
}

TEST(Preprocess, SmartResizeRules) {
  // Below min_pixels → scaled up; above max_pixels → scaled down; multiples of the factor always.
  auto s = smart_resize(10, 20, 28, 56 * 56, 28 * 28 * 1280);
  EXPECT_EQ(s.height % 28, 0);
  EXPECT_EQ(s.width % 28, 0);
  EXPECT_GE(int64_t(s.height) * s.width, 56 * 56);
  auto big = smart_resize(4000, 6000, 28, 56 * 56, 28 * 28 * 1280);
  EXPECT_LE(int64_t(big.height) * big.width, 28 * 28 * 1280);
  EXPECT_THROW(smart_resize(1, 300, 28, 56 * 56, 28 * 28 * 1280), Error);
}

TEST(Preprocess, RefusesOtherResamplers) {
  EXPECT_THROW(ImageProcessorConfig::from_json(json{{"resample", 2}}, "cfg"), Error);
  EXPECT_THROW(ImageProcessorConfig::from_json(json{{"image_std", {0, 1, 1}}}, "cfg"), Error);
}

}  // namespace
}  // namespace fs::vision

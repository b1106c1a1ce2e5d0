// The rule that lets f16 carry a GEMM fed by an RMSNorm: the bound sqrt(dim) · max |norm weight| and the weights.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backends/cuda/host/f16_range.h"

namespace fs::cuda {
namespace {

TEST(F16Range, NormedInputsFitWhileTheirBoundDoes) {
  EXPECT_TRUE(f16_holds_normed_inputs(4096, 1.0f, 0.5f));
  // sqrt(4096) = 64: the bound reaches 65504 at a norm weight of 1023.5.
  EXPECT_TRUE(f16_holds_normed_inputs(4096, 1023.5f, 0.5f));
  EXPECT_FALSE(f16_holds_normed_inputs(4096, 1024.0f, 0.5f));
  EXPECT_TRUE(f16_holds_normed_inputs(64, 8188.0f, 0.5f));
  EXPECT_FALSE(f16_holds_normed_inputs(64, 8189.0f, 0.5f));
}

TEST(F16Range, WeightsMustFitToo) {
  EXPECT_TRUE(f16_holds_normed_inputs(64, 1.0f, kF16Max));
  EXPECT_FALSE(f16_holds_normed_inputs(64, 1.0f, 65536.0f));
}

TEST(F16Range, NanOrInfinityNeverFits) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(f16_holds_normed_inputs(64, nan, 1.0f));
  EXPECT_FALSE(f16_holds_normed_inputs(64, 1.0f, nan));
  EXPECT_FALSE(f16_holds_normed_inputs(64, inf, 1.0f));
  EXPECT_FALSE(f16_holds_normed_inputs(64, 1.0f, inf));
}

}  // namespace
}  // namespace fs::cuda

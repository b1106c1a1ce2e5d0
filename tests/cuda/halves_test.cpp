// The weight-range kernels against host loops: bf16 → f16 in place with the host's rounding, and the largest
// magnitude folded over bf16 and f32 values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "backends/cuda/kernels/halves_ops.h"
#include "core/dtype.h"
#include "gpu_fixture.h"

namespace fs::test {
namespace {

namespace k = cuda::kernels;

TEST(CudaHalves, EveryBf16BecomesTheNearestF16) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = uint16_t(i);
  uint16_t* d = gpu.upload(all);
  k::bf16_to_f16(d, all.size(), gpu.stream());
  const auto got = gpu.download(d, all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const float v = bf16_to_f32(all[i]);
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(got[i]))) << i;
      continue;
    }
    ASSERT_EQ(got[i], f32_to_f16(v)) << "bf16 bits " << i << " = " << v;
  }
}

TEST(CudaHalves, LargestMagnitudeFoldsOverEveryValue) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(11);
  for (size_t n : {size_t(1), size_t(255), size_t(4097), size_t(3) << 20}) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> f = random_floats(rng, n);
    const size_t at = rng() % n;
    f[at] = -7.5f;  // the largest magnitude, negative
    std::vector<uint16_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = f32_to_bf16(f[i]);
    float* out = gpu.upload(std::vector<float>{0.0f, 9.0f});
    k::fold_max_abs_f32(gpu.upload(f), n, out, gpu.stream());
    k::fold_max_abs_bf16(gpu.upload(b), n, out + 1, gpu.stream());
    const auto got = gpu.download(out, 2);
    EXPECT_EQ(got[0], 7.5f);
    EXPECT_EQ(got[1], 9.0f);  // a larger value already there stays
    k::fold_max_abs_bf16(gpu.upload(b), n, out, gpu.stream());
    EXPECT_EQ(gpu.download(out, 1)[0], 7.5f);
  }
  std::vector<float> with_nan = {1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f};
  float* out = gpu.upload(std::vector<float>{0.0f});
  k::fold_max_abs_f32(gpu.upload(with_nan), with_nan.size(), out, gpu.stream());
  EXPECT_FALSE(gpu.download(out, 1)[0] <= 65504.0f);  // a NaN never passes a range check
}

}  // namespace
}  // namespace fs::test

// Device random fills against the host formula: the same values for the same (seed, index), bf16 rounded once.
#include <gtest/gtest.h>

#include "backends/cuda/kernels/fill_ops.h"
#include "core/dtype.h"
#include "gpu_fixture.h"

namespace fs::test {
namespace {

namespace k = cuda::kernels;

TEST(CudaFill, DeviceValuesEqualTheHostFormula) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  for (size_t n : {size_t(1), size_t(1000), size_t(3) << 20}) {
    float* f = gpu.poisoned<float>(n);
    uint16_t* b = gpu.poisoned<uint16_t>(n);
    k::fill_uniform_f32(f, n, 42 + n, 0.5f, 1.0f, gpu.stream());
    k::fill_uniform_bf16(b, n, 7 + n, 0.02f, 0.0f, gpu.stream());
    const auto fh = gpu.download(f, n);
    const auto bh = gpu.download(b, n);
    for (size_t i = 0; i < n; i += 1 + i / 3) {
      ASSERT_EQ(fh[i], k::uniform_value(42 + n, i, 0.5f, 1.0f)) << n << " " << i;
      ASSERT_EQ(bh[i], f32_to_bf16(k::uniform_value(7 + n, i, 0.02f, 0.0f))) << n << " " << i;
      ASSERT_GE(fh[i], 0.5f);
      ASSERT_LT(fh[i], 1.5f);
    }
  }
}

TEST(CudaFill, SeedsGiveDifferentValues) {
  EXPECT_NE(k::uniform_value(1, 0, 1.0f, 0.0f), k::uniform_value(2, 0, 1.0f, 0.0f));
  EXPECT_NE(k::uniform_value(1, 0, 1.0f, 0.0f), k::uniform_value(1, 1, 1.0f, 0.0f));
}

}  // namespace
}  // namespace fs::test

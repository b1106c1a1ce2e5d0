// The image upload path of a tower that keeps the processor's order (the Qwen3.5 tower: no windows, a learned
// position grid's taps in its bookkeeping) on the fake driver: images of different sizes, each with its own
// bookkeeping size, through the one pinned stage reserved for the largest, pixels landing in processor order.
#include <gtest/gtest.h>

#include <cstring>

#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/image_stage.h"
#include "backends/cuda/host/stream.h"
#include "core/dtype.h"
#include "fake_driver.h"

namespace fs::cuda {
namespace {

using test::FakeDriver;

// Qwen3.5's patches: 3·2·16·16 values, merged 2×2; bookkeeping per patch: cos and sin of head_dim / 2 = 36 angles,
// four grid taps (index and weight).
constexpr std::size_t kPatchDim = 1536;
constexpr std::size_t kGroup = 4;
constexpr std::size_t kMetaPerPatch = 2 * 36 * 4 + 4 * 8;
constexpr std::size_t kMaxPatches = 64 * 64;

float pixel(unsigned image, std::size_t i) { return float(int((i * 7919u + image * 104729u) % 4001u) - 2000) / 997.0f; }

TEST(ImageStage, ProcessorOrderImagesOfEverySizeReuseTheOneStage) {
  FakeDriver fake;
  PinnedBudget budget(std::size_t{1} << 30);
  Stream stream;
  const std::size_t patches[] = {64 * 64, 10 * 14, 40 * 56, 64 * 64, 2 * 2};
  DeviceArena arena(5 * (kMaxPatches * kPatchDim * 2 + kMaxPatches * kMetaPerPatch) + (1 << 16), "targets");
  ImageStage stage(budget, kMaxPatches, kPatchDim, kMaxPatches * kMetaPerPatch);
  EXPECT_EQ(fake.count("cuMemHostAlloc"), 1u);
  std::vector<DeviceSpan> pixels, metas;
  for (std::size_t n : patches) {
    pixels.push_back(arena.allocate(n * kPatchDim * 2, "pixels"));
    metas.push_back(arena.allocate(n * kMetaPerPatch, "meta"));
  }
  fake.clear_calls();
  std::vector<std::vector<unsigned char>> meta;
  for (unsigned im = 0; im < 5; ++im) {
    const std::size_t n = patches[im];
    std::vector<float> values(n * kPatchDim);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = pixel(im, i);
    meta.emplace_back(n * kMetaPerPatch, static_cast<unsigned char>(0x30 + im));
    ImageRows rows{values.data(), n, kPatchDim, kGroup, {}};
    stage.upload_image(rows, pixels[im].ptr, meta.back().data(), meta.back().size(), metas[im].ptr, stream.handle());
  }
  EXPECT_EQ(fake.count("cuMemHostAlloc"), 0u) << "an image allocated its own pinned stage";
  EXPECT_EQ(fake.count("cuMemFreeHost"), 0u) << "a pinned buffer was freed between images";
  EXPECT_EQ(budget.allocations(), 1u);
  EXPECT_EQ(budget.frees(), 0u);
  EXPECT_EQ(stage.images_uploaded(), 5u);
  EXPECT_EQ(stage.waits(), 4u);

  stream.synchronize();
  for (unsigned im = 0; im < 5; ++im) {
    SCOPED_TRACE("image " + std::to_string(im));
    const std::size_t n = patches[im];
    const std::vector<unsigned char> raw = fake.peek(pixels[im].ptr, n * kPatchDim * 2);
    const auto* got = reinterpret_cast<const std::uint16_t*>(raw.data());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n * kPatchDim; ++i) wrong += got[i] != f32_to_bf16(pixel(im, i));
    EXPECT_EQ(wrong, 0u);
    EXPECT_EQ(fake.peek(metas[im].ptr, meta[im].size()), meta[im]);
  }
}

}  // namespace
}  // namespace fs::cuda

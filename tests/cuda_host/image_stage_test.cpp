// The vision tower's image upload path on the fake driver: four full-size images through the one pinned stage
// reserved at start, each refill after waiting on the previous copy's event, pixels converted to bf16 and gathered
// into window order on the way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/image_stage.h"
#include "backends/cuda/host/stream.h"
#include "core/dtype.h"
#include "core/error.h"
#include "fake_driver.h"

namespace fs::cuda {
namespace {

using test::FakeDriver;

// A 2048×1664 photo resized to multiples of 28 (2044×1652): 146×118 patches of 3·2·14·14 values, merged 2×2.
constexpr std::size_t kPatchDim = 1176;
constexpr std::size_t kPatches = 146 * 118;
constexpr std::size_t kGroup = 4;
constexpr std::size_t kMetaBytes = 4096;

float pixel(unsigned image, std::size_t i) {
  std::uint32_t h = std::uint32_t(i) * 2654435761u ^ (image + 1) * 40503u;
  h ^= h >> 15;
  return float(int(h % 4001) - 2000) / 997.0f;
}

std::vector<float> image_values(unsigned image) {
  std::vector<float> v(kPatches * kPatchDim);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = pixel(image, i);
  return v;
}

std::vector<int> shuffled_groups(unsigned seed) {
  std::vector<int> order(kPatches / kGroup);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  return order;
}

std::vector<std::size_t> positions(const std::vector<std::string>& names, const std::string& name) {
  std::vector<std::size_t> found;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) found.push_back(i);
  return found;
}

TEST(ImageStage, FourFullSizeImagesReuseOnePinnedStageAfterAnEventWait) {
  FakeDriver fake;
  PinnedBudget budget(std::size_t{1} << 30);
  Stream stream;
  DeviceArena arena(4 * (kPatches * kPatchDim * 2 + kMetaBytes) + (1 << 16), "targets");
  ImageStage stage(budget, kPatches, kPatchDim, kMetaBytes);
  EXPECT_EQ(fake.count("cuMemHostAlloc"), 1u);
  std::vector<DeviceSpan> pixels, metas;
  for (int i = 0; i < 4; ++i) {
    pixels.push_back(arena.allocate(kPatches * kPatchDim * 2, "pixels"));
    metas.push_back(arena.allocate(kMetaBytes, "meta"));
  }
  fake.clear_calls();
  std::vector<std::vector<int>> orders;
  std::vector<std::vector<unsigned char>> meta;
  for (unsigned im = 0; im < 4; ++im) {
    std::vector<float> values = image_values(im);
    orders.push_back(shuffled_groups(im));
    meta.emplace_back(kMetaBytes, static_cast<unsigned char>(0x40 + im));
    ImageRows rows{values.data(), kPatches, kPatchDim, kGroup, orders.back()};
    // No stream synchronize between images: only the stage's own wait keeps an image from overwriting the last.
    stage.upload_image(rows, pixels[im].ptr, meta.back().data(), kMetaBytes, metas[im].ptr, stream.handle());
  }
  EXPECT_EQ(fake.count("cuMemHostAlloc"), 0u) << "an image allocated its own pinned stage";
  EXPECT_EQ(fake.count("cuMemFreeHost"), 0u) << "a pinned buffer was freed between images";
  EXPECT_EQ(budget.allocations(), 1u);
  EXPECT_EQ(budget.frees(), 0u);
  EXPECT_EQ(stage.images_uploaded(), 4u);

  const auto calls = fake.calls();
  const auto names = fake.call_names();
  const auto copies = positions(names, "cuMemcpyHtoDAsync_v2");
  const auto records = positions(names, "cuEventRecord");
  const auto waits = positions(names, "cuEventSynchronize");
  ASSERT_EQ(copies.size(), 8u);  // pixels and meta of each image
  ASSERT_EQ(records.size(), 4u);
  ASSERT_EQ(waits.size(), 3u);
  EXPECT_EQ(stage.waits(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    // Image i + 1 is written into the stage only after waiting on the event recorded after image i's copies.
    EXPECT_GT(waits[i], records[i]);
    EXPECT_LT(waits[i], copies[2 * (i + 1)]);
    EXPECT_EQ(calls[waits[i]].args[0], calls[records[i]].args[0]);
  }
  // Every copy reads the same pinned stage.
  const std::uint64_t base = calls[copies[0]].args[1];
  for (std::size_t i = 0; i < copies.size(); ++i) {
    const auto& c = calls[copies[i]];
    EXPECT_TRUE(fake.is_pinned(reinterpret_cast<const void*>(c.args[1]), c.args[2]));
    if (i % 2 == 0) {
      EXPECT_EQ(c.args[1], base) << "image " << i / 2 << " used another stage";
    }
  }

  stream.synchronize();
  for (unsigned im = 0; im < 4; ++im) {
    SCOPED_TRACE("image " + std::to_string(im));
    std::vector<unsigned char> raw = fake.peek(pixels[im].ptr, kPatches * kPatchDim * 2);
    const auto* got = reinterpret_cast<const std::uint16_t*>(raw.data());
    std::size_t wrong = 0;
    for (std::size_t slot = 0; slot < orders[im].size(); ++slot) {
      const std::size_t g = std::size_t(orders[im][slot]);
      for (std::size_t e = 0; e < kGroup * kPatchDim; ++e)
        wrong += got[slot * kGroup * kPatchDim + e] != f32_to_bf16(pixel(im, g * kGroup * kPatchDim + e));
    }
    EXPECT_EQ(wrong, 0u);
    EXPECT_EQ(fake.peek(metas[im].ptr, kMetaBytes), meta[im]);
  }
}

TEST(ImageStage, DestroyingTheStageWaitsThenFreesItsOneAllocation) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  Stream stream;
  DeviceArena arena(1 << 16, "targets");
  DeviceSpan target = arena.allocate(8 * 16 * 2, "pixels");
  std::vector<float> values(8 * 16, 1.5f);
  {
    ImageStage stage(budget, 8, 16, 0);
    stage.upload_image({values.data(), 8, 16, 1, {}}, target.ptr, nullptr, 0, 0, stream.handle());
    fake.clear_calls();
  }
  const auto names = fake.call_names();
  const auto wait = positions(names, "cuEventSynchronize");
  const auto free = positions(names, "cuMemFreeHost");
  ASSERT_EQ(wait.size(), 1u);
  ASSERT_EQ(free.size(), 1u);
  EXPECT_LT(wait[0], free[0]);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(budget.frees(), 1u);
  const auto raw = fake.peek(target.ptr, 8 * 16 * 2);
  const auto* got = reinterpret_cast<const std::uint16_t*>(raw.data());
  for (std::size_t i = 0; i < 8 * 16; ++i) EXPECT_EQ(got[i], f32_to_bf16(1.5f));
}

TEST(ImageStage, ImageLargerThanTheStageIsRefusedWithoutAllocating) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  Stream stream;
  DeviceArena arena(1 << 16, "targets");
  DeviceSpan target = arena.allocate(4096, "pixels");
  ImageStage stage(budget, 8, 16, 64);
  std::vector<float> values(12 * 16, 0.5f);
  fake.clear_calls();
  try {
    stage.upload_image({values.data(), 12, 16, 4, {}}, target.ptr, nullptr, 0, 0, stream.handle());
    FAIL() << "an image over the stage was accepted";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("12 patches"), std::string::npos) << m;
    EXPECT_NE(m.find("8 patches"), std::string::npos) << m;
  }
  std::vector<unsigned char> meta(100, 1);
  EXPECT_THROW(stage.upload_image({values.data(), 8, 16, 4, {}}, target.ptr, meta.data(), meta.size(), target.ptr,
                                  stream.handle()),
               Error);
  EXPECT_EQ(fake.count("cuMemHostAlloc"), 0u);
  EXPECT_EQ(fake.count("cuMemcpyHtoDAsync_v2"), 0u);
  // The stage still serves an image that fits.
  stage.upload_image({values.data(), 8, 16, 4, {}}, target.ptr, nullptr, 0, 0, stream.handle());
  stream.synchronize();
  EXPECT_EQ(stage.images_uploaded(), 1u);
}

TEST(ImageStage, GroupOrderMustBeAPermutation) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  Stream stream;
  DeviceArena arena(1 << 16, "targets");
  DeviceSpan target = arena.allocate(4096, "pixels");
  ImageStage stage(budget, 8, 16, 0);
  std::vector<float> values(8 * 16, 0.5f);
  const std::vector<int> repeated{0, 0}, short_order{1}, outside{0, 2};
  for (const auto* order : {&repeated, &short_order, &outside})
    EXPECT_THROW(stage.upload_image({values.data(), 8, 16, 4, *order}, target.ptr, nullptr, 0, 0, stream.handle()),
                 Error);
  EXPECT_THROW(stage.upload_image({values.data(), 6, 16, 4, {}}, target.ptr, nullptr, 0, 0, stream.handle()), Error);
  EXPECT_EQ(fake.count("cuMemcpyHtoDAsync_v2"), 0u);
}

TEST(ImageStage, WeightBytesGoThroughTheSameStageInPieces) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  Stream stream;
  DeviceArena arena(1 << 16, "targets");
  ImageStage stage(budget, 4, 8, 0);  // 64 bytes
  DeviceSpan target = arena.allocate(1000, "weights");
  std::vector<unsigned char> bytes(1000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 3);
  fake.clear_calls();
  stage.upload_bytes(target.ptr, bytes.data(), bytes.size(), stream.handle());
  EXPECT_EQ(fake.count("cuMemHostAlloc"), 0u);
  EXPECT_EQ(fake.count("cuMemcpyHtoDAsync_v2"), 16u);  // ceil(1000 / 64)
  EXPECT_EQ(fake.count("cuEventSynchronize"), 15u);
  stage.wait_idle();
  EXPECT_EQ(fake.peek(target.ptr, 1000), bytes);
}

}  // namespace
}  // namespace fs::cuda

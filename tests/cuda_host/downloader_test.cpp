// Downloads on the fake driver: discrete cards copy straight into the caller's buffer with nothing allocated;
// integrated devices go through one pinned bounce buffer counted in the budget and freed with its owner.
#include <gtest/gtest.h>

#include "backends/cuda/host/device.h"
#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/downloader.h"
#include "backends/cuda/host/stream.h"
#include "core/error.h"
#include "fake_driver.h"

namespace fs::cuda {
namespace {

using test::FakeDriver;

std::vector<unsigned char> pattern(std::size_t bytes, unsigned seed) {
  std::vector<unsigned char> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>((i * 13 + seed * 5 + 3) & 0xFF);
  return data;
}

// Fills device memory through the driver (an async copy then a stream wait).
void fill(CUdeviceptr dst, const std::vector<unsigned char>& data, const Stream& stream) {
  ASSERT_EQ(driver().memcpy_htod_async(dst, data.data(), data.size(), stream.handle()), CUDA_SUCCESS);
  stream.synchronize();
}

TEST(Downloader, DiscreteCopiesStraightIntoTheCallersBuffer) {
  FakeDriver fake;
  fake.set_integrated(false);
  Device device(0);
  PinnedBudget budget(1 << 20);
  DeviceArena arena(1 << 16, "test arena");
  Stream stream;
  Downloader downloader(device, budget);
  DeviceSpan source = arena.allocate(3000, "logits");
  auto expected = pattern(3000, 1);
  fill(source.ptr, expected, stream);
  fake.clear_calls();
  std::vector<unsigned char> out(3000);
  for (int round = 0; round < 3; ++round) {
    std::fill(out.begin(), out.end(), 0);
    downloader.download(out.data(), source.ptr, out.size(), stream.handle());
    EXPECT_EQ(out, expected);
  }
  EXPECT_FALSE(downloader.staged());
  EXPECT_EQ(fake.count("cuMemHostAlloc"), 0u);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(downloader.pinned_bytes(), 0u);
  std::size_t copies = 0;
  for (const auto& call : fake.calls()) {
    if (call.name != "cuMemcpyDtoHAsync_v2") continue;
    ++copies;
    EXPECT_EQ(call.args[0], reinterpret_cast<std::uintptr_t>(out.data()));
    EXPECT_EQ(call.args[2], 3000u);
  }
  EXPECT_EQ(copies, 3u);
}

TEST(Downloader, IntegratedStagesThroughOnePinnedBounceBuffer) {
  FakeDriver fake;
  fake.set_integrated(true);
  Device device(0);
  PinnedBudget budget(1 << 20);
  DeviceArena arena(1 << 16, "test arena");
  Stream stream;
  DeviceSpan source = arena.allocate(2500, "logits");
  auto expected = pattern(2500, 2);
  fill(source.ptr, expected, stream);
  {
    Downloader downloader(device, budget, 1024);
    EXPECT_TRUE(downloader.staged());
    std::vector<unsigned char> out(2500);
    for (int round = 0; round < 4; ++round) {
      std::fill(out.begin(), out.end(), 0);
      downloader.download(out.data(), source.ptr, out.size(), stream.handle());
      EXPECT_EQ(out, expected) << "round " << round;
    }
    // One bounce buffer, counted in the pinned budget, serves every download in bounce-sized pieces.
    EXPECT_EQ(fake.count("cuMemHostAlloc"), 1u);
    EXPECT_EQ(fake.count("cuMemFreeHost"), 0u);
    EXPECT_EQ(downloader.pinned_bytes(), 1024u);
    EXPECT_EQ(budget.used(), 1024u);
    std::size_t pieces = 0;
    for (const auto& call : fake.calls()) {
      if (call.name != "cuMemcpyDtoHAsync_v2") continue;
      ++pieces;
      EXPECT_TRUE(fake.is_pinned(reinterpret_cast<const void*>(call.args[0]), call.args[2]));
      EXPECT_NE(call.args[0], reinterpret_cast<std::uintptr_t>(out.data()));
    }
    EXPECT_EQ(pieces, 4u * 3u);
  }
  // Released with its owner.
  EXPECT_EQ(fake.count("cuMemFreeHost"), 1u);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(budget.live(), 0u);
  EXPECT_EQ(fake.live_host_allocations(), 0u);
}

TEST(Downloader, IntegratedAttributeIsReadOnceWhateverTheTraffic) {
  FakeDriver fake;
  fake.set_integrated(true);
  Device device(0);
  PinnedBudget budget(1 << 20);
  DeviceArena arena(1 << 12, "test arena");
  Stream stream;
  DeviceSpan source = arena.allocate(64, "row");
  fill(source.ptr, pattern(64, 3), stream);
  for (int i = 0; i < 5; ++i) {
    Downloader downloader(device, budget, 64);
    std::vector<unsigned char> out(64);
    for (int j = 0; j < 5; ++j) downloader.download(out.data(), source.ptr, 64, stream.handle());
    EXPECT_TRUE(device.integrated());
    EXPECT_TRUE(device.info().integrated);
  }
  EXPECT_EQ(fake.attribute_reads(CU_DEVICE_ATTRIBUTE_INTEGRATED), 1u);
}

TEST(Downloader, FailedCopyIsReportedAndTheNextDownloadIsRight) {
  for (bool integrated : {false, true}) {
    SCOPED_TRACE(integrated ? "integrated" : "discrete");
    FakeDriver fake;
    fake.set_integrated(integrated);
    Device device(0);
    PinnedBudget budget(1 << 20);
    DeviceArena arena(1 << 16, "test arena");
    Stream stream;
    DeviceSpan source = arena.allocate(700, "logits");
    auto expected = pattern(700, 4);
    fill(source.ptr, expected, stream);
    Downloader downloader(device, budget, 256);
    std::vector<unsigned char> out(700, 0);
    fake.fail_call("cuMemcpyDtoHAsync_v2", integrated ? 2 : 1, CUDA_ERROR_LAUNCH_FAILED);
    try {
      downloader.download(out.data(), source.ptr, out.size(), stream.handle());
      FAIL() << "the failed copy was not reported";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cuMemcpyDtoHAsync_v2"), std::string::npos) << e.what();
    }
    std::fill(out.begin(), out.end(), 0);
    downloader.download(out.data(), source.ptr, out.size(), stream.handle());
    EXPECT_EQ(out, expected);
    EXPECT_EQ(fake.count("cuMemHostAlloc"), integrated ? 1u : 0u);
    EXPECT_EQ(budget.used(), integrated ? 256u : 0u);
    EXPECT_EQ(fake.pending_operations(), 0u);
  }
}

TEST(Downloader, BounceBufferOverThePinnedBudgetIsRefused) {
  FakeDriver fake;
  fake.set_integrated(true);
  Device device(0);
  PinnedBudget budget(100);
  DeviceArena arena(1 << 12, "test arena");
  Stream stream;
  DeviceSpan source = arena.allocate(64, "row");
  Downloader downloader(device, budget, 200);
  std::vector<unsigned char> out(64);
  try {
    downloader.download(out.data(), source.ptr, 64, stream.handle());
    FAIL() << "over-budget bounce buffer was allocated";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("download bounce buffer"), std::string::npos) << message;
    EXPECT_NE(message.find("200"), std::string::npos) << message;
    EXPECT_NE(message.find("100"), std::string::npos) << message;
  }
  EXPECT_EQ(fake.count("cuMemHostAlloc"), 0u);
  EXPECT_EQ(budget.used(), 0u);
}

}  // namespace
}  // namespace fs::cuda

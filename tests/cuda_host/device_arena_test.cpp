// Device arena on the fake driver: one reservation, aligned bump allocation, refusals naming the numbers.
#include <gtest/gtest.h>

#include "backends/cuda/host/device_arena.h"
#include "core/error.h"
#include "fake_driver.h"

namespace fs::cuda {
namespace {

using test::FakeDriver;

TEST(DeviceArena, ReservesOnceAndHandsOutAlignedSpans) {
  FakeDriver fake;
  {
    DeviceArena arena(10000, "weights");
    EXPECT_EQ(fake.count("cuMemAlloc_v2"), 1u);
    DeviceSpan a = arena.allocate(10, "a");
    DeviceSpan b = arena.allocate(10, "b");
    DeviceSpan c = arena.allocate(3, "c", 1024);
    EXPECT_EQ(a.ptr, arena.base());
    EXPECT_EQ(b.ptr, arena.base() + 256);
    EXPECT_EQ((c.ptr - arena.base()) % 1024, 0u);
    EXPECT_EQ(c.ptr, arena.base() + 1024);
    EXPECT_EQ(arena.used(), 1027u);
    EXPECT_EQ(fake.count("cuMemAlloc_v2"), 1u);
    // Spans are real device memory the driver accepts.
    EXPECT_EQ(fake.table().memset_d8_async(c.ptr, 7, 3, nullptr), CUDA_SUCCESS);
  }
  EXPECT_EQ(fake.count("cuMemFree_v2"), 1u);
  EXPECT_EQ(fake.live_device_allocations(), 0u);
}

TEST(DeviceArena, RefusesPastTheBudgetNamingTheNumbers) {
  FakeDriver fake;
  DeviceArena arena(4096, "scratch arena");
  arena.allocate(3000, "activations");
  try {
    arena.allocate(2000, "logits");
    FAIL() << "over-budget allocation succeeded";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("scratch arena"), std::string::npos) << message;
    EXPECT_NE(message.find("logits needs 2000 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("only 1096 of its 4096-byte budget remain (3000 used)"), std::string::npos) << message;
  }
  EXPECT_EQ(arena.used(), 3000u);
  // Exactly the rest still fits after alignment.
  DeviceSpan rest = arena.allocate(4096 - 3072, "rest");
  EXPECT_EQ(rest.ptr, arena.base() + 3072);
  EXPECT_EQ(arena.remaining(), 0u);
  EXPECT_THROW(arena.allocate(1, "one more"), Error);
}

TEST(DeviceArena, ScratchMarksGiveMemoryBack) {
  FakeDriver fake;
  DeviceArena arena(8192, "arena");
  arena.allocate(1000, "weights");
  std::size_t mark = arena.mark();
  DeviceSpan first = arena.allocate(4000, "scratch");
  arena.release_to(mark);
  DeviceSpan again = arena.allocate(4000, "scratch");
  EXPECT_EQ(first.ptr, again.ptr);
  EXPECT_EQ(arena.peak(), arena.used());
  EXPECT_THROW(arena.release_to(arena.used() + 1), Error);
}

TEST(DeviceArena, KvPagesComeFromTheArenaAndOverflowIsRefused) {
  FakeDriver fake;
  DeviceArena arena(1 << 20, "arena");
  DeviceSpan pages = arena.allocate_pieces(16, 4096, "kv pages");
  EXPECT_EQ(pages.bytes, 16u * 4096u);
  EXPECT_THROW(arena.allocate_pieces(std::size_t{1} << 40, std::size_t{1} << 40, "kv pages"), Error);
  EXPECT_THROW(arena.allocate_pieces(300, 4096, "kv pages"), Error);
  EXPECT_THROW(arena.allocate(16, "odd", 48), Error);
}

TEST(DeviceArena, BudgetBeyondTheDeviceIsRefusedWithFreeAndTotal) {
  FakeDriver fake;
  fake.set_total_memory(1 << 20);
  try {
    DeviceArena arena(std::size_t{2} << 20, "weights arena");
    FAIL() << "arena larger than the device was reserved";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("weights arena"), std::string::npos) << message;
    EXPECT_NE(message.find("2097152 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("1048576 bytes free of 1048576"), std::string::npos) << message;
    EXPECT_NE(message.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << message;
  }
  EXPECT_EQ(fake.live_device_allocations(), 0u);
}

}  // namespace
}  // namespace fs::cuda

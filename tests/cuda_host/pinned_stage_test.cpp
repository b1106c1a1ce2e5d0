// Upload staging on the fake driver: one pinned stage serves every upload, each reuse waits on the previous
// copy's event, large uploads go in pieces, and a failed copy leaves the stage usable.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/pinned_stage.h"
#include "backends/cuda/host/stream.h"
#include "core/error.h"
#include "fake_driver.h"

namespace fs::cuda {
namespace {

using test::FakeDriver;

std::vector<unsigned char> pattern(std::size_t bytes, unsigned seed) {
  std::vector<unsigned char> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>((i * 31 + seed * 7 + 1) & 0xFF);
  return data;
}

// Positions in the call record of every call named `name`.
std::vector<std::size_t> positions(const std::vector<std::string>& names, const std::string& name) {
  std::vector<std::size_t> found;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) found.push_back(i);
  }
  return found;
}

TEST(PinnedStage, OneAllocationServesManyUploadsWithoutFrees) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  DeviceArena arena(1 << 20, "test arena");
  Stream stream;
  PinnedStage stage(budget, 4096);
  constexpr int kUploads = 50;
  std::vector<DeviceSpan> targets;
  for (int i = 0; i < kUploads; ++i) targets.push_back(arena.allocate(1000, "upload target"));
  for (int i = 0; i < kUploads; ++i) {
    auto data = pattern(1000, static_cast<unsigned>(i));
    stage.upload(targets[i].ptr, data.data(), data.size(), stream.handle());
  }
  EXPECT_EQ(fake.count("cuMemHostAlloc"), 1u);
  EXPECT_EQ(fake.count("cuMemFreeHost"), 0u);
  EXPECT_EQ(budget.allocations(), 1u);
  EXPECT_EQ(budget.frees(), 0u);
  EXPECT_EQ(budget.used(), 4096u);
  EXPECT_EQ(fake.count("cuMemcpyHtoDAsync_v2"), static_cast<std::size_t>(kUploads));
  // Every copy reads from the pinned stage, never from the caller's pageable buffer.
  for (const auto& call : fake.calls()) {
    if (call.name != "cuMemcpyHtoDAsync_v2") continue;
    EXPECT_TRUE(fake.is_pinned(reinterpret_cast<const void*>(call.args[1]), call.args[2]));
  }
  stream.synchronize();
  for (int i = 0; i < kUploads; ++i) {
    EXPECT_EQ(fake.peek(targets[i].ptr, 1000), pattern(1000, static_cast<unsigned>(i))) << "upload " << i;
  }
}

TEST(PinnedStage, EachReuseWaitsOnThePreviousCopysEvent) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  DeviceArena arena(1 << 16, "test arena");
  Stream stream;
  PinnedStage stage(budget, 256);
  DeviceSpan a = arena.allocate(256, "a");
  DeviceSpan b = arena.allocate(256, "b");
  DeviceSpan c = arena.allocate(256, "c");
  fake.clear_calls();
  auto da = pattern(256, 1), db = pattern(256, 2), dc = pattern(256, 3);
  stage.upload(a.ptr, da.data(), 256, stream.handle());
  stage.upload(b.ptr, db.data(), 256, stream.handle());
  stage.upload(c.ptr, dc.data(), 256, stream.handle());
  auto names = fake.call_names();
  auto copies = positions(names, "cuMemcpyHtoDAsync_v2");
  auto records = positions(names, "cuEventRecord");
  auto waits = positions(names, "cuEventSynchronize");
  ASSERT_EQ(copies.size(), 3u);
  ASSERT_EQ(records.size(), 3u);
  ASSERT_EQ(waits.size(), 2u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_LT(copies[i], records[i]) << "event recorded after copy " << i;
  // The wait for copy i sits after its event was recorded and before the stage is refilled for copy i + 1.
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_GT(waits[i], records[i]);
    EXPECT_LT(waits[i], copies[i + 1]);
  }
  auto calls = fake.calls();
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(calls[waits[i]].args[0], calls[records[i]].args[0]);
  stream.synchronize();
  EXPECT_EQ(fake.peek(a.ptr, 256), da);
  EXPECT_EQ(fake.peek(b.ptr, 256), db);
  EXPECT_EQ(fake.peek(c.ptr, 256), dc);
}

TEST(PinnedStage, LargeUploadGoesInStageSizedPiecesWithoutAllocating) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  DeviceArena arena(1 << 16, "test arena");
  Stream stream;
  PinnedStage stage(budget, 1000);
  DeviceSpan target = arena.allocate(4500, "big");
  auto data = pattern(4500, 9);
  fake.clear_calls();
  stage.upload(target.ptr, data.data(), data.size(), stream.handle());
  EXPECT_EQ(fake.count("cuMemHostAlloc"), 0u);
  EXPECT_EQ(fake.count("cuMemcpyHtoDAsync_v2"), 5u);
  EXPECT_EQ(fake.count("cuEventSynchronize"), 4u);
  EXPECT_EQ(stage.pieces_copied(), 5u);
  std::size_t total = 0;
  for (const auto& call : fake.calls()) {
    if (call.name == "cuMemcpyHtoDAsync_v2") {
      EXPECT_LE(call.args[2], 1000u);
      EXPECT_EQ(call.args[0], target.ptr + total);
      total += call.args[2];
    }
  }
  EXPECT_EQ(total, 4500u);
  stage.wait_idle();
  EXPECT_EQ(fake.pending_operations(), 0u);
  EXPECT_EQ(fake.peek(target.ptr, 4500), data);
}

TEST(PinnedStage, FailedCopyIsReportedAndTheStageStaysUsable) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  DeviceArena arena(1 << 16, "test arena");
  Stream stream;
  DeviceSpan first = arena.allocate(512, "first");
  DeviceSpan second = arena.allocate(512, "second");
  auto d1 = pattern(512, 4), d2 = pattern(512, 5), d3 = pattern(512, 6);
  {
    PinnedStage stage(budget, 512);
    stage.upload(first.ptr, d1.data(), 512, stream.handle());
    fake.fail_call("cuMemcpyHtoDAsync_v2", 1, CUDA_ERROR_ILLEGAL_ADDRESS);
    try {
      stage.upload(second.ptr, d2.data(), 512, stream.handle());
      FAIL() << "the failed copy was not reported";
    } catch (const Error& e) {
      std::string message = e.what();
      EXPECT_NE(message.find("cuMemcpyHtoDAsync_v2"), std::string::npos) << message;
      EXPECT_NE(message.find("an illegal memory access was encountered"), std::string::npos) << message;
    }
    EXPECT_EQ(budget.used(), 512u);
    EXPECT_EQ(budget.allocations(), 1u);
    EXPECT_EQ(budget.frees(), 0u);
    // After recovery the same stage carries the next upload and the earlier one is intact.
    stage.upload(second.ptr, d3.data(), 512, stream.handle());
    EXPECT_EQ(fake.count("cuMemHostAlloc"), 1u);
    stream.synchronize();
    EXPECT_EQ(fake.peek(first.ptr, 512), d1);
    EXPECT_EQ(fake.peek(second.ptr, 512), d3);
  }
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(budget.frees(), 1u);
  EXPECT_EQ(fake.live_host_allocations(), 0u);
}

TEST(PinnedStage, FailedEventRecordFallsBackToAStreamWaitBeforeReuse) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  DeviceArena arena(1 << 16, "test arena");
  Stream stream;
  PinnedStage stage(budget, 128);
  DeviceSpan a = arena.allocate(128, "a");
  DeviceSpan b = arena.allocate(128, "b");
  auto da = pattern(128, 7), db = pattern(128, 8);
  fake.fail_call("cuEventRecord", 1);
  EXPECT_THROW(stage.upload(a.ptr, da.data(), 128, stream.handle()), Error);
  fake.clear_calls();
  stage.upload(b.ptr, db.data(), 128, stream.handle());
  auto names = fake.call_names();
  auto syncs = positions(names, "cuStreamSynchronize");
  auto copies = positions(names, "cuMemcpyHtoDAsync_v2");
  ASSERT_EQ(syncs.size(), 1u);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_LT(syncs[0], copies[0]);
  stream.synchronize();
  EXPECT_EQ(fake.peek(a.ptr, 128), da);
  EXPECT_EQ(fake.peek(b.ptr, 128), db);
}

TEST(PinnedStage, FailedWaitIsReportedAndRetriedOnTheNextUpload) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  DeviceArena arena(1 << 16, "test arena");
  Stream stream;
  PinnedStage stage(budget, 64);
  DeviceSpan a = arena.allocate(64, "a");
  DeviceSpan b = arena.allocate(64, "b");
  auto da = pattern(64, 1), db = pattern(64, 2);
  stage.upload(a.ptr, da.data(), 64, stream.handle());
  fake.fail_call("cuEventSynchronize", 1);
  EXPECT_THROW(stage.upload(b.ptr, db.data(), 64, stream.handle()), Error);
  // The stage was not overwritten while the first copy might still be reading it.
  EXPECT_EQ(fake.count("cuMemcpyHtoDAsync_v2"), 1u);
  stage.upload(b.ptr, db.data(), 64, stream.handle());
  stream.synchronize();
  EXPECT_EQ(fake.peek(a.ptr, 64), da);
  EXPECT_EQ(fake.peek(b.ptr, 64), db);
}

TEST(PinnedStage, StageOverThePinnedBudgetIsRefusedWithTheNumbers) {
  FakeDriver fake;
  PinnedBudget budget(1000);
  PinnedStage kept(budget, 600, "first stage");
  try {
    PinnedStage refused(budget, 500, "second stage");
    FAIL() << "over-budget stage was allocated";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("second stage"), std::string::npos) << message;
    EXPECT_NE(message.find("500"), std::string::npos) << message;
    EXPECT_NE(message.find("400"), std::string::npos) << message;
    EXPECT_NE(message.find("1000"), std::string::npos) << message;
  }
  EXPECT_EQ(fake.count("cuMemHostAlloc"), 1u);
  EXPECT_EQ(budget.used(), 600u);
}

TEST(PinnedStage, FailedPinnedAllocationLeavesTheBudgetUntouched) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  fake.fail_call("cuMemHostAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_THROW(PinnedStage(budget, 4096), Error);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(budget.allocations(), 0u);
  EXPECT_EQ(fake.live_events(), 0u);
  PinnedStage stage(budget, 4096);
  EXPECT_EQ(budget.used(), 4096u);
  EXPECT_EQ(budget.allocations(), 1u);
}

TEST(PinnedStage, DestroyingTheStageFinishesItsCopyThenFreesEverything) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  DeviceArena arena(1 << 16, "test arena");
  Stream stream;
  DeviceSpan target = arena.allocate(300, "target");
  auto data = pattern(300, 3);
  {
    PinnedStage stage(budget, 300);
    stage.upload(target.ptr, data.data(), data.size(), stream.handle());
    fake.clear_calls();
  }
  auto names = fake.call_names();
  auto wait = positions(names, "cuEventSynchronize");
  auto free = positions(names, "cuMemFreeHost");
  ASSERT_EQ(wait.size(), 1u);
  ASSERT_EQ(free.size(), 1u);
  EXPECT_LT(wait[0], free[0]);
  EXPECT_EQ(fake.peek(target.ptr, 300), data);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(budget.live(), 0u);
  EXPECT_EQ(fake.live_host_allocations(), 0u);
  EXPECT_EQ(fake.live_events(), 0u);
}

}  // namespace
}  // namespace fs::cuda

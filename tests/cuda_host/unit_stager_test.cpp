// --vision-host weight staging on the fake driver: one pinned allocation holds every unit, one device slot sized
// for the largest unit receives them in unit order on the tower's stream, and nothing is freed between encodes.
#include <gtest/gtest.h>

#include <cstring>

#include "backends/cuda/host/check.h"
#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/stream.h"
#include "backends/cuda/host/unit_stager.h"
#include "core/error.h"
#include "fake_driver.h"

namespace fs::cuda {
namespace {

using test::FakeDriver;

// Patch embedding, three blocks, the merger.
const std::vector<std::size_t> kUnits = {3000, 10000, 10000, 10000, 7000};

void fill_units(UnitStager& stager) {
  for (std::size_t u = 0; u < stager.units(); ++u) {
    auto* bytes = static_cast<unsigned char*>(stager.host_unit(u));
    for (std::size_t i = 0; i < stager.unit_bytes(u); ++i) bytes[i] = static_cast<unsigned char>(u * 37 + i * 11);
  }
}

std::vector<unsigned char> unit_bytes(const UnitStager& stager, std::size_t u) {
  std::vector<unsigned char> v(stager.unit_bytes(u));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<unsigned char>(u * 37 + i * 11);
  return v;
}

TEST(UnitStager, OnePinnedAllocationOneSlotCopiesInUnitOrderNothingFreedBetweenEncodes) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  Stream stream;
  fake.clear_calls();
  UnitStager stager(budget, kUnits, "tower");
  EXPECT_EQ(fake.count("cuMemHostAlloc"), 1u);
  EXPECT_EQ(fake.count("cuMemAlloc_v2"), 1u);
  EXPECT_EQ(budget.allocations(), 1u);
  EXPECT_GE(stager.slot_bytes(), 10000u);
  EXPECT_LT(stager.slot_bytes(), 10000u + 256u);
  std::size_t total = 0;
  for (std::size_t b : kUnits) total += b;
  EXPECT_GE(stager.host_bytes(), total);
  for (std::size_t u = 0; u < kUnits.size(); ++u)
    EXPECT_TRUE(fake.is_pinned(stager.host_unit(u), kUnits[u])) << "unit " << u;
  fill_units(stager);

  // Each unit's "kernels" read the slot after its copy, in stream order: here a device copy of the slot.
  DeviceArena reads(2 * kUnits.size() * 10240, "kernel outputs");
  std::vector<std::vector<DeviceSpan>> outputs(2);
  for (auto& per_encode : outputs)
    for (std::size_t u = 0; u < kUnits.size(); ++u) per_encode.push_back(reads.allocate(kUnits[u], "read"));
  fake.clear_calls();
  for (int encode = 0; encode < 2; ++encode) {
    for (std::size_t u = 0; u < kUnits.size(); ++u) {
      stager.stage(u, stream.handle());
      FS_CU(memcpy_dtod_async, outputs[encode][u].ptr, stager.slot(), kUnits[u], stream.handle());
    }
  }
  EXPECT_EQ(fake.count("cuMemHostAlloc"), 0u);
  EXPECT_EQ(fake.count("cuMemFreeHost"), 0u);
  EXPECT_EQ(fake.count("cuMemAlloc_v2"), 0u);
  EXPECT_EQ(fake.count("cuMemFree_v2"), 0u);
  EXPECT_EQ(stager.copies(), 2 * kUnits.size());
  std::size_t n = 0;
  for (const auto& call : fake.calls()) {
    if (call.name != "cuMemcpyHtoDAsync_v2") continue;
    const std::size_t u = n++ % kUnits.size();
    EXPECT_EQ(call.args[0], stager.slot());
    EXPECT_EQ(call.args[1], reinterpret_cast<std::uintptr_t>(stager.host_unit(u)));
    EXPECT_EQ(call.args[2], kUnits[u]);
    EXPECT_EQ(call.args[3], reinterpret_cast<std::uintptr_t>(stream.handle())) << "copy off the tower's stream";
  }
  EXPECT_EQ(n, 2 * kUnits.size());
  stream.synchronize();
  for (int encode = 0; encode < 2; ++encode)
    for (std::size_t u = 0; u < kUnits.size(); ++u)
      EXPECT_EQ(fake.peek(outputs[encode][u].ptr, kUnits[u]), unit_bytes(stager, u))
          << "encode " << encode << " unit " << u << " read another unit's weights";
}

TEST(UnitStager, FreesItsPinnedCopyAndSlotWithItsOwner) {
  FakeDriver fake;
  PinnedBudget budget(1 << 20);
  {
    UnitStager stager(budget, kUnits);
    EXPECT_EQ(fake.live_host_allocations(), 1u);
  }
  EXPECT_EQ(fake.count("cuMemFreeHost"), 1u);
  EXPECT_EQ(fake.live_host_allocations(), 0u);
  EXPECT_EQ(fake.live_device_allocations(), 0u);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(budget.frees(), 1u);
}

TEST(UnitStager, OverBudgetOrEmptyUnitsAreRefused) {
  FakeDriver fake;
  PinnedBudget budget(20000);
  EXPECT_THROW(UnitStager(budget, kUnits), Error);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(fake.live_device_allocations(), 0u);
  EXPECT_THROW(UnitStager(budget, std::vector<std::size_t>{}), Error);
  EXPECT_THROW(UnitStager(budget, std::vector<std::size_t>{100, 0}), Error);
  UnitStager ok(budget, {100, 200});
  EXPECT_THROW(ok.host_unit(2), Error);
}

}  // namespace
}  // namespace fs::cuda

#pragma once
// Weights kept in pinned host memory and staged unit by unit (--vision-host): every unit's bytes live in one pinned
// allocation, filled once at load; one device slot, sized for the largest unit, receives a unit just before the
// kernels that read it. Copies and kernels share one stream, so a copy into the slot starts only after the
// previous unit's kernels finished.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/driver_types.h"
#include "backends/cuda/host/pinned_memory.h"

namespace fs::cuda {

class UnitStager {
 public:
  // One pinned allocation for all units (each 256-byte aligned) counted in `budget`, one device slot.
  UnitStager(PinnedBudget& budget, std::vector<std::size_t> unit_bytes, const std::string& what = "staged weights");
  UnitStager(const UnitStager&) = delete;
  UnitStager& operator=(const UnitStager&) = delete;

  std::size_t units() const { return bytes_.size(); }
  std::size_t unit_bytes(std::size_t unit) const { return bytes_.at(unit); }
  // Where unit `unit` is written at load time (pinned host memory).
  void* host_unit(std::size_t unit);
  CUdeviceptr slot() const { return slot_; }
  std::size_t slot_bytes() const { return slot_arena_->capacity(); }
  std::size_t host_bytes() const { return host_.size(); }

  // Queues the copy of `unit` into the slot on `stream`; the caller queues that unit's kernels after it on the
  // same stream.
  void stage(std::size_t unit, CUstream stream);
  std::uint64_t copies() const { return copies_; }

 private:
  std::vector<std::size_t> bytes_, offsets_;
  PinnedBuffer host_;
  std::unique_ptr<DeviceArena> slot_arena_;
  CUdeviceptr slot_ = 0;
  std::uint64_t copies_ = 0;
};

}  // namespace fs::cuda

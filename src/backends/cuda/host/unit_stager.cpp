// Pinned weights staged into one device slot.
#include "backends/cuda/host/unit_stager.h"

#include <algorithm>

#include "backends/cuda/host/check.h"
#include "core/error.h"

namespace fs::cuda {

namespace {

constexpr std::size_t kAlign = DeviceArena::kDefaultAlignment;

std::size_t padded(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::vector<std::size_t> offsets_of(const std::vector<std::size_t>& bytes) {
  if (bytes.empty()) throw Error("staged weights need at least one unit");
  std::vector<std::size_t> offsets;
  std::size_t at = 0;
  for (std::size_t b : bytes) {
    if (b == 0) throw Error("staged weights: a unit has no bytes");
    offsets.push_back(at);
    at += padded(b);
  }
  offsets.push_back(at);
  return offsets;
}

}  // namespace

UnitStager::UnitStager(PinnedBudget& budget, std::vector<std::size_t> unit_bytes, const std::string& what)
    : bytes_(std::move(unit_bytes)),
      offsets_(offsets_of(bytes_)),
      host_(budget, offsets_.back(), what + " (pinned host copy)") {
  const std::size_t largest = *std::max_element(bytes_.begin(), bytes_.end());
  slot_arena_ = std::make_unique<DeviceArena>(padded(largest), what + " device slot");
  slot_ = slot_arena_->allocate(largest, what + " device slot").ptr;
}

void* UnitStager::host_unit(std::size_t unit) {
  if (unit >= bytes_.size()) throw Error("staged weights: unit " + std::to_string(unit) + " does not exist");
  return static_cast<unsigned char*>(host_.data()) + offsets_[unit];
}

void UnitStager::stage(std::size_t unit, CUstream stream) {
  FS_CU(memcpy_htod_async, slot_, host_unit(unit), bytes_[unit], stream);
  ++copies_;
}

}  // namespace fs::cuda

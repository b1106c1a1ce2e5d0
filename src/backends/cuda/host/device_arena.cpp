// Bump allocation over one device reservation.
#include "backends/cuda/host/device_arena.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "backends/cuda/host/check.h"
#include "backends/cuda/host/driver_table.h"
#include "core/error.h"

namespace fs::cuda {

namespace {

bool is_power_of_two(std::size_t value) { return value != 0 && (value & (value - 1)) == 0; }

}  // namespace

DeviceArena::DeviceArena(std::size_t budget_bytes, std::string name) : name_(std::move(name)) {
  if (budget_bytes == 0) return;
  CUresult result = driver().mem_alloc(&base_, budget_bytes);
  if (result != CUDA_SUCCESS) {
    base_ = 0;
    std::size_t free_bytes = 0, total_bytes = 0;
    std::string memory;
    if (driver().mem_get_info(&free_bytes, &total_bytes) == CUDA_SUCCESS) {
      memory = " (" + std::to_string(free_bytes) + " bytes free of " + std::to_string(total_bytes) + ")";
    }
    throw Error(name_ + ": reserving its budget of " + std::to_string(budget_bytes) + " bytes failed" + memory +
                ": " + std::string(driver_symbol::mem_alloc) + " returned " + describe_result(result));
  }
  capacity_ = budget_bytes;
}

DeviceArena::~DeviceArena() {
  if (base_) driver().mem_free(base_);
}

DeviceSpan DeviceArena::allocate(std::size_t bytes, const std::string& what, std::size_t alignment) {
  if (!is_power_of_two(alignment)) {
    throw Error(name_ + ": alignment " + std::to_string(alignment) + " for " + what + " is not a power of two");
  }
  std::size_t start = (used_ + alignment - 1) & ~(alignment - 1);
  if (start < used_ || start > capacity_ || bytes > capacity_ - start) {
    throw Error(name_ + ": " + what + " needs " + std::to_string(bytes) + " bytes (aligned to " +
                std::to_string(alignment) + ") but only " + std::to_string(capacity_ - std::min(used_, capacity_)) +
                " of its " + std::to_string(capacity_) + "-byte budget remain (" + std::to_string(used_) +
                " used)");
  }
  used_ = start + bytes;
  peak_ = std::max(peak_, used_);
  return {base_ + start, bytes};
}

DeviceSpan DeviceArena::allocate_pieces(std::size_t count, std::size_t piece_bytes, const std::string& what,
                                        std::size_t alignment) {
  if (piece_bytes != 0 && count > std::numeric_limits<std::size_t>::max() / piece_bytes) {
    throw Error(name_ + ": " + what + " asks for " + std::to_string(count) + " pieces of " +
                std::to_string(piece_bytes) + " bytes, which overflows");
  }
  return allocate(count * piece_bytes, what, alignment);
}

void DeviceArena::release_to(std::size_t mark) {
  if (mark > used_) {
    throw Error(name_ + ": release to mark " + std::to_string(mark) + " is past the fill level " +
                std::to_string(used_));
  }
  used_ = mark;
}

}  // namespace fs::cuda

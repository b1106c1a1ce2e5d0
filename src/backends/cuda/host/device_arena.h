#pragma once
// Device memory for weights, scratch and KV pages: one reservation of the byte budget, handed out by bump
// allocation with alignment; a request past the budget is refused with the numbers.
#include <cstddef>
#include <string>

#include "backends/cuda/host/driver_types.h"

namespace fs::cuda {

// A range of device memory owned by an arena.
struct DeviceSpan {
  CUdeviceptr ptr = 0;
  std::size_t bytes = 0;
};

class DeviceArena {
 public:
  static constexpr std::size_t kDefaultAlignment = 256;

  // Reserves `budget_bytes` of device memory with one cuMemAlloc; throws fs::Error with the free/total numbers
  // when the device cannot hold it.
  DeviceArena(std::size_t budget_bytes, std::string name = "device arena");
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // Hands out `bytes` aligned to `alignment` (a power of two); `what` names the user in the refusal message.
  DeviceSpan allocate(std::size_t bytes, const std::string& what, std::size_t alignment = kDefaultAlignment);
  // `count` equal pieces of `piece_bytes` each, back to back (e.g. KV pages); refuses on overflow or budget.
  DeviceSpan allocate_pieces(std::size_t count, std::size_t piece_bytes, const std::string& what,
                             std::size_t alignment = kDefaultAlignment);

  // Scratch use: remember the fill level, allocate, then give everything after the mark back.
  std::size_t mark() const { return used_; }
  void release_to(std::size_t mark);

  std::size_t capacity() const { return capacity_; }
  std::size_t used() const { return used_; }
  std::size_t remaining() const { return capacity_ - used_; }
  std::size_t peak() const { return peak_; }
  CUdeviceptr base() const { return base_; }

 private:
  std::string name_;
  CUdeviceptr base_ = 0;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  std::size_t peak_ = 0;
};

}  // namespace fs::cuda

#pragma once
// Device → host copies. Discrete cards copy straight into the caller's buffer. Integrated devices (attribute read
// once when the Device opened) copy through a pinned bounce buffer, allocated on first use, counted in the pinned
// budget and freed with the Downloader; larger downloads go in bounce-sized pieces.
#include <cstddef>
#include <cstdint>

#include "backends/cuda/host/device.h"
#include "backends/cuda/host/driver_types.h"
#include "backends/cuda/host/pinned_memory.h"

namespace fs::cuda {

class Downloader {
 public:
  static constexpr std::size_t kDefaultBounceBytes = std::size_t{4} << 20;

  Downloader(const Device& device, PinnedBudget& budget, std::size_t bounce_bytes = kDefaultBounceBytes);

  // Copies `bytes` from device `src` into host `dst` on `stream` and returns once they are in `dst`.
  // On failure throws fs::Error; the Downloader stays usable.
  void download(void* dst, CUdeviceptr src, std::size_t bytes, CUstream stream);

  // True when downloads go through the bounce buffer (integrated device).
  bool staged() const { return staged_; }
  // Pinned bytes this Downloader holds right now (0 until an integrated device's first download).
  std::size_t pinned_bytes() const { return bounce_.size(); }

 private:
  PinnedBudget& budget_;
  bool staged_;
  std::size_t bounce_bytes_;
  PinnedBuffer bounce_;
};

}  // namespace fs::cuda

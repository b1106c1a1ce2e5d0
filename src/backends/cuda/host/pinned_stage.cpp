// Reused pinned upload stage.
#include "backends/cuda/host/pinned_stage.h"

#include <algorithm>
#include <cstring>

#include "backends/cuda/host/check.h"

namespace fs::cuda {

PinnedStage::PinnedStage(PinnedBudget& budget, std::size_t stage_bytes, const std::string& what)
    : buffer_(budget, stage_bytes, what) {}

PinnedStage::~PinnedStage() {
  try {
    wait_for_stage();
  } catch (...) {
    // The driver already failed; freeing the stage is all that is left to do.
  }
}

void PinnedStage::wait_for_stage() {
  if (guard_ == Guard::kEvent) {
    FS_CU(event_synchronize, event_.handle());
    ++waits_;
  } else if (guard_ == Guard::kStream) {
    FS_CU(stream_synchronize, guarded_stream_);
    ++waits_;
  }
  guard_ = Guard::kIdle;
}

void PinnedStage::wait_idle() { wait_for_stage(); }

void* PinnedStage::acquire() {
  wait_for_stage();
  return buffer_.data();
}

void PinnedStage::send(std::span<const Part> parts, CUstream stream) {
  auto* stage = static_cast<unsigned char*>(buffer_.data());
  for (const Part& part : parts) {
    if (part.bytes == 0) continue;
    FS_CU(memcpy_htod_async, part.dst, stage + part.offset, part.bytes, stream);
    // Until the event after the copies is recorded, only a whole-stream wait guards the stage.
    guard_ = Guard::kStream;
    guarded_stream_ = stream;
  }
  FS_CU(event_record, event_.handle(), stream);
  guard_ = Guard::kEvent;
}

void PinnedStage::upload(CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream) {
  const auto* from = static_cast<const unsigned char*>(src);
  for (std::size_t offset = 0; offset < bytes;) {
    const std::size_t piece = std::min(bytes - offset, buffer_.size());
    std::memcpy(acquire(), from + offset, piece);
    const Part part{dst + offset, 0, piece};
    send(std::span<const Part>(&part, 1), stream);
    ++pieces_copied_;
    offset += piece;
  }
}

}  // namespace fs::cuda

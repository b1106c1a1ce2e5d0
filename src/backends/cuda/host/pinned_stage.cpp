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
  } else if (guard_ == Guard::kStream) {
    FS_CU(stream_synchronize, guarded_stream_);
  }
  guard_ = Guard::kIdle;
}

void PinnedStage::wait_idle() { wait_for_stage(); }

void PinnedStage::upload(CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream) {
  const auto* from = static_cast<const unsigned char*>(src);
  auto* stage = static_cast<unsigned char*>(buffer_.data());
  for (std::size_t offset = 0; offset < bytes;) {
    std::size_t piece = std::min(bytes - offset, buffer_.size());
    wait_for_stage();
    std::memcpy(stage, from + offset, piece);
    FS_CU(memcpy_htod_async, dst + offset, stage, piece, stream);
    guard_ = Guard::kStream;
    guarded_stream_ = stream;
    FS_CU(event_record, event_.handle(), stream);
    guard_ = Guard::kEvent;
    ++pieces_copied_;
    offset += piece;
  }
}

}  // namespace fs::cuda

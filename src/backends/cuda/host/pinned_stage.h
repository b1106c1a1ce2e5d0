#pragma once
// Upload staging ("copy sources"): a pinned host stage reserved once and reused for every upload. Before the
// stage is overwritten the previous copy out of it is waited for (its event); copies go host → stage → device
// asynchronously on the caller's stream; an upload larger than the stage goes in stage-sized pieces.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "backends/cuda/host/driver_types.h"
#include "backends/cuda/host/pinned_memory.h"
#include "backends/cuda/host/stream.h"

namespace fs::cuda {

class PinnedStage {
 public:
  // Allocates the `stage_bytes` stage (counted in `budget`) and the event guarding its reuse.
  PinnedStage(PinnedBudget& budget, std::size_t stage_bytes, const std::string& what = "upload stage");
  // Waits for a copy still reading the stage before freeing it.
  ~PinnedStage();
  PinnedStage(const PinnedStage&) = delete;
  PinnedStage& operator=(const PinnedStage&) = delete;

  // Copies `bytes` from host `src` to device `dst`, queued on `stream`. Returns once the last piece is queued;
  // `src` may be reused at once. On failure throws fs::Error and the stage stays usable.
  void upload(CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream);
  // For callers that write the stage themselves: waits for the last copy out of it and returns it to fill.
  void* acquire();
  // One filled part of the stage and where it goes.
  struct Part {
    CUdeviceptr dst = 0;
    std::size_t offset = 0, bytes = 0;
  };
  // Queues the copies of filled parts on `stream`, then records the event the next acquire() waits on.
  void send(std::span<const Part> parts, CUstream stream);
  // Blocks until the last copy out of the stage has finished.
  void wait_idle();
  // Recorded after the last queued copy: other streams may wait on it (cuStreamWaitEvent).
  CUevent last_copy_event() const { return event_.handle(); }

  std::size_t capacity() const { return buffer_.size(); }
  std::uint64_t pieces_copied() const { return pieces_copied_; }
  std::uint64_t waits() const { return waits_; }  // times a reuse waited on the previous copy

 private:
  // What guards the stage against overwrite: nothing queued, an event after the last copy, or (when recording
  // the event failed) only a whole-stream synchronize.
  enum class Guard { kIdle, kEvent, kStream };

  void wait_for_stage();

  PinnedBuffer buffer_;
  Event event_;
  Guard guard_ = Guard::kIdle;
  CUstream guarded_stream_ = nullptr;
  std::uint64_t pieces_copied_ = 0;
  std::uint64_t waits_ = 0;
};

}  // namespace fs::cuda

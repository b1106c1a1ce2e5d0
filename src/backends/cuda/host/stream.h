#pragma once
// Owning handles for a driver stream and a driver event.
#include "backends/cuda/host/driver_types.h"

namespace fs::cuda {

// A non-blocking stream, destroyed with its owner.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  CUstream handle() const { return handle_; }
  // Blocks until everything queued on the stream has finished.
  void synchronize() const;
  // Makes later work on this stream wait for `event` without blocking the host.
  void wait(CUevent event) const;

 private:
  CUstream handle_ = nullptr;
};

// A timing-free event, destroyed with its owner.
class Event {
 public:
  Event();
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  CUevent handle() const { return handle_; }
  void record(CUstream stream) const;
  // Blocks until the work before the last record() has finished.
  void synchronize() const;
  // True when the work before the last record() has finished; never blocks.
  bool ready() const;

 private:
  CUevent handle_ = nullptr;
};

}  // namespace fs::cuda

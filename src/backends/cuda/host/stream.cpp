// Stream and event handles over the driver table.
#include "backends/cuda/host/stream.h"

#include <utility>

#include "backends/cuda/host/check.h"

namespace fs::cuda {

Stream::Stream() { FS_CU(stream_create, &handle_, CU_STREAM_NON_BLOCKING); }

Stream::~Stream() {
  if (handle_) driver().stream_destroy(handle_);
}

Stream::Stream(Stream&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (handle_) driver().stream_destroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void Stream::synchronize() const { FS_CU(stream_synchronize, handle_); }

void Stream::wait(CUevent event) const { FS_CU(stream_wait_event, handle_, event, 0); }

Event::Event() { FS_CU(event_create, &handle_, CU_EVENT_DISABLE_TIMING); }

Event::~Event() {
  if (handle_) driver().event_destroy(handle_);
}

Event::Event(Event&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (handle_) driver().event_destroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void Event::record(CUstream stream) const { FS_CU(event_record, handle_, stream); }

void Event::synchronize() const { FS_CU(event_synchronize, handle_); }

bool Event::ready() const {
  CUresult result = driver().event_query(handle_);
  if (result == CUDA_ERROR_NOT_READY) return false;
  check(result, driver_symbol::event_query);
  return true;
}

}  // namespace fs::cuda

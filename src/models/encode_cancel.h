#pragma once
// Stopping an image encode from another thread: the encoder checks the flag between units and inside long ones.
#include <atomic>

#include "core/error.h"

namespace fs::vision {

using CancelFlag = std::atomic<bool>;

// Thrown by an encode (or a scheduled image job) that stopped because its flag was set.
struct EncodeCancelled : Error {
  using Error::Error;
};

// Throws EncodeCancelled when `cancel` is set.
inline void throw_if_cancelled(const CancelFlag* cancel) {
  if (cancel && cancel->load(std::memory_order_relaxed)) throw EncodeCancelled("the image encode was cancelled");
}

}  // namespace fs::vision

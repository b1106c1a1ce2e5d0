#pragma once
// A large zero-filled buffer whose memory the kernel supplies page by page on first touch, so a pool sized for
// the worst case costs resident memory only for what is used.
#include <cstddef>

namespace fs {

class ZeroedMemory {
 public:
  ZeroedMemory() = default;
  explicit ZeroedMemory(size_t bytes);
  ~ZeroedMemory();
  ZeroedMemory(ZeroedMemory&& other) noexcept;
  ZeroedMemory& operator=(ZeroedMemory&& other) noexcept;
  ZeroedMemory(const ZeroedMemory&) = delete;
  ZeroedMemory& operator=(const ZeroedMemory&) = delete;

  float* floats() const { return static_cast<float*>(data_); }
  size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace fs

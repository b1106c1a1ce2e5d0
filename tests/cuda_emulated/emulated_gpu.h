#pragma once
// The test fixture's Gpu for the emulated kernels: buffers in host memory, the same calls as on a device.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace fs::test {

#define FS_REQUIRE_GPU() (void)0

class Gpu {
 public:
  template <typename T>
  T* upload(const std::vector<T>& host) {
    T* p = allocate<T>(host.size());
    if (!host.empty()) std::memcpy(static_cast<void*>(p), host.data(), host.size() * sizeof(T));
    return p;
  }
  // A buffer of n elements filled with 0xff bytes (NaN for floats), so unwritten outputs show.
  template <typename T>
  T* poisoned(size_t n) {
    T* p = allocate<T>(n);
    poison(p, n);
    return p;
  }
  template <typename T>
  void poison(T* p, size_t n) {
    std::memset(static_cast<void*>(p), 0xff, n * sizeof(T));
  }
  template <typename T>
  std::vector<T> download(const T* p, size_t n) {
    return std::vector<T>(p, p + n);
  }
  void* stream() const { return nullptr; }

 private:
  // Exactly n elements (new[] aligns to 16 bytes), so AddressSanitizer builds catch a kernel reading past a buffer.
  template <typename T>
  T* allocate(size_t n) {
    buffers_.emplace_back(new unsigned char[std::max<size_t>(n * sizeof(T), 1)]);
    return reinterpret_cast<T*>(buffers_.back().get());
  }
  std::vector<std::unique_ptr<unsigned char[]>> buffers_;
};

}  // namespace fs::test

#include "core/zeroed_memory.h"

#include <sys/mman.h>

#include <utility>

#include "core/error.h"

namespace fs {

ZeroedMemory::ZeroedMemory(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  data_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (data_ == MAP_FAILED) {
    data_ = nullptr;
    bytes_ = 0;
    throw Error("cannot reserve " + std::to_string(bytes) + " bytes of memory");
  }
}

ZeroedMemory::~ZeroedMemory() {
  if (data_) ::munmap(data_, bytes_);
}

ZeroedMemory::ZeroedMemory(ZeroedMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

ZeroedMemory& ZeroedMemory::operator=(ZeroedMemory&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace fs

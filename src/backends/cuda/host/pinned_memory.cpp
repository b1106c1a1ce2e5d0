// Pinned host memory and its budget.
#include "backends/cuda/host/pinned_memory.h"

#include <algorithm>
#include <utility>

#include "backends/cuda/host/check.h"
#include "core/error.h"

namespace fs::cuda {

void PinnedBudget::reserve(std::size_t bytes, const std::string& what) {
  std::lock_guard lock(mutex_);
  if (bytes > limit_ - used_) {
    throw Error("pinned host memory: " + what + " needs " + std::to_string(bytes) + " bytes but only " +
                std::to_string(limit_ - used_) + " of the " + std::to_string(limit_) + "-byte pinned budget remain (" +
                std::to_string(used_) + " used)");
  }
  used_ += bytes;
  peak_ = std::max(peak_, used_);
}

void PinnedBudget::release(std::size_t bytes, bool allocated) {
  std::lock_guard lock(mutex_);
  used_ -= std::min(bytes, used_);
  if (allocated) ++frees_;
}

void PinnedBudget::count_allocation() {
  std::lock_guard lock(mutex_);
  ++allocations_;
}

std::size_t PinnedBudget::used() const {
  std::lock_guard lock(mutex_);
  return used_;
}

std::size_t PinnedBudget::peak() const {
  std::lock_guard lock(mutex_);
  return peak_;
}

std::size_t PinnedBudget::allocations() const {
  std::lock_guard lock(mutex_);
  return allocations_;
}

std::size_t PinnedBudget::frees() const {
  std::lock_guard lock(mutex_);
  return frees_;
}

std::size_t PinnedBudget::live() const {
  std::lock_guard lock(mutex_);
  return allocations_ - frees_;
}

PinnedBuffer::PinnedBuffer(PinnedBudget& budget, std::size_t bytes, const std::string& what) {
  if (bytes == 0) throw Error("pinned host memory: " + what + " asks for 0 bytes");
  budget.reserve(bytes, what);
  void* data = nullptr;
  CUresult result = driver().mem_host_alloc(&data, bytes, CU_MEMHOSTALLOC_PORTABLE);
  if (result != CUDA_SUCCESS || !data) {
    budget.release(bytes, false);
    check(result == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : result, driver_symbol::mem_host_alloc,
          what + " (" + std::to_string(bytes) + " bytes)");
  }
  budget.count_allocation();
  budget_ = &budget;
  data_ = data;
  bytes_ = bytes;
}

PinnedBuffer::~PinnedBuffer() { free_now(); }

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    free_now();
    budget_ = std::exchange(other.budget_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void PinnedBuffer::free_now() noexcept {
  if (!data_) return;
  driver().mem_free_host(data_);
  budget_->release(bytes_, true);
  data_ = nullptr;
  bytes_ = 0;
  budget_ = nullptr;
}

}  // namespace fs::cuda

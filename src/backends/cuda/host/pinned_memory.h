#pragma once
// Page-locked host memory under its own byte budget: the budget counts bytes, allocations and frees; a buffer
// is reserved in the budget before cuMemHostAlloc and given back after cuMemFreeHost.
#include <cstddef>
#include <mutex>
#include <string>

namespace fs::cuda {

class PinnedBudget {
 public:
  explicit PinnedBudget(std::size_t limit_bytes) : limit_(limit_bytes) {}
  PinnedBudget(const PinnedBudget&) = delete;
  PinnedBudget& operator=(const PinnedBudget&) = delete;

  // Counts `bytes` as used; throws fs::Error naming `what` and the numbers when the limit would be passed.
  void reserve(std::size_t bytes, const std::string& what);
  // Gives back bytes counted by reserve(); `allocated` says whether a real allocation is being freed.
  void release(std::size_t bytes, bool allocated);
  // Records one successful cuMemHostAlloc.
  void count_allocation();

  std::size_t limit() const { return limit_; }
  std::size_t used() const;
  std::size_t peak() const;
  std::size_t allocations() const;  // successful cuMemHostAlloc calls so far
  std::size_t frees() const;        // cuMemFreeHost calls so far
  std::size_t live() const;         // allocations - frees

 private:
  mutable std::mutex mutex_;
  std::size_t limit_;
  std::size_t used_ = 0;
  std::size_t peak_ = 0;
  std::size_t allocations_ = 0;
  std::size_t frees_ = 0;
};

// One pinned host allocation, counted in a budget and freed with its owner.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // Reserves `bytes` in `budget` then allocates them; on any failure nothing stays counted.
  PinnedBuffer(PinnedBudget& budget, std::size_t bytes, const std::string& what);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t size() const { return bytes_; }
  bool empty() const { return data_ == nullptr; }

 private:
  void free_now() noexcept;

  PinnedBudget* budget_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace fs::cuda

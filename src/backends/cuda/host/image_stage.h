#pragma once
// The vision tower's image upload stage: one pinned buffer reserved at start for the largest admitted image (its
// patches as bf16 plus the pass's bookkeeping bytes) and reused by every image. Before the stage is refilled the
// previous copy out of it is waited for (its event); the patches are converted to bf16 and gathered into the
// tower's row order while they are written into the stage, then copied to the device on the caller's stream.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "backends/cuda/host/driver_types.h"
#include "backends/cuda/host/pinned_stage.h"

namespace fs::cuda {

// One image's pixels: f32 rows of `row_elems`, taken in groups of `group_rows` rows in `group_order`.
struct ImageRows {
  const float* values = nullptr;
  std::size_t rows = 0;
  std::size_t row_elems = 0;
  std::size_t group_rows = 1;
  std::span<const int> group_order;  // every group exactly once; empty → natural order
};

class ImageStage {
 public:
  // Reserves `max_rows` × `row_elems` bf16 values plus `meta_bytes` of pinned memory in `budget` (one allocation).
  ImageStage(PinnedBudget& budget, std::size_t max_rows, std::size_t row_elems, std::size_t meta_bytes,
             const std::string& what = "image upload stage");
  ImageStage(const ImageStage&) = delete;
  ImageStage& operator=(const ImageStage&) = delete;

  // Writes the image (bf16, gathered) and `meta` into the stage after the previous copy finished, then queues
  // their copies to `pixels_dst` and `meta_dst` on `stream`. Throws fs::Error for an image or meta block larger
  // than the stage or a group order that is not a permutation; the stage stays usable.
  void upload_image(const ImageRows& image, CUdeviceptr pixels_dst, const void* meta, std::size_t meta_bytes,
                    CUdeviceptr meta_dst, CUstream stream);
  // Copies arbitrary bytes through the stage in stage-sized pieces (weights at load time).
  void upload_bytes(CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream) {
    stage_.upload(dst, src, bytes, stream);
  }
  // Blocks until the last copy out of the stage has finished.
  void wait_idle() { stage_.wait_idle(); }

  std::size_t capacity() const { return stage_.capacity(); }
  std::size_t max_rows() const { return max_rows_; }
  std::uint64_t images_uploaded() const { return images_; }
  std::uint64_t waits() const { return stage_.waits(); }  // times a refill waited on the previous copy

 private:
  PinnedStage stage_;  // waits for its previous copy before each refill, and before it is freed
  std::size_t max_rows_;
  std::size_t row_elems_;
  std::uint64_t images_ = 0;
};

}  // namespace fs::cuda

// The reused pinned stage of image uploads.
#include "backends/cuda/host/image_stage.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cuda/host/check.h"
#include "core/dtype.h"
#include "core/error.h"

namespace fs::cuda {

namespace {

std::size_t image_bytes(std::size_t rows, std::size_t row_elems) { return rows * row_elems * 2; }

// Checks that `order` names every group of the image exactly once.
void check_order(const ImageRows& im) {
  if (im.group_rows == 0 || im.rows % im.group_rows)
    throw Error("image rows (" + std::to_string(im.rows) + ") are not whole groups of " +
                std::to_string(im.group_rows));
  const std::size_t groups = im.rows / im.group_rows;
  if (im.group_order.empty()) return;
  if (im.group_order.size() != groups) throw Error("image row order does not cover every group");
  std::vector<bool> seen(groups, false);
  for (int g : im.group_order) {
    if (g < 0 || std::size_t(g) >= groups || seen[std::size_t(g)]) throw Error("image row order is not a permutation");
    seen[std::size_t(g)] = true;
  }
}

}  // namespace

ImageStage::ImageStage(PinnedBudget& budget, std::size_t max_rows, std::size_t row_elems, std::size_t meta_bytes,
                       const std::string& what)
    : buffer_(budget, image_bytes(max_rows, row_elems) + meta_bytes, what), max_rows_(max_rows), row_elems_(row_elems) {}

ImageStage::~ImageStage() {
  try {
    wait_for_stage();
  } catch (...) {
    // The driver already failed; freeing the stage is all that is left to do.
  }
}

void ImageStage::wait_for_stage() {
  if (guard_ == Guard::kEvent) {
    FS_CU(event_synchronize, event_.handle());
    ++waits_;
  } else if (guard_ == Guard::kStream) {
    FS_CU(stream_synchronize, guarded_stream_);
    ++waits_;
  }
  guard_ = Guard::kIdle;
}

void ImageStage::wait_idle() { wait_for_stage(); }

// Until the event after the copies is recorded, only a whole-stream wait guards the stage.
void ImageStage::guard_stream(CUstream stream) {
  guard_ = Guard::kStream;
  guarded_stream_ = stream;
}

void ImageStage::record(CUstream stream) {
  FS_CU(event_record, event_.handle(), stream);
  guard_ = Guard::kEvent;
}

void ImageStage::upload_image(const ImageRows& im, CUdeviceptr pixels_dst, const void* meta, std::size_t meta_bytes,
                              CUdeviceptr meta_dst, CUstream stream) {
  if (im.row_elems != row_elems_)
    throw Error("image rows have " + std::to_string(im.row_elems) + " values, the stage was sized for " +
                std::to_string(row_elems_));
  if (im.rows > max_rows_)
    throw Error("image of " + std::to_string(im.rows) + " patches is larger than the " + std::to_string(max_rows_) +
                " patches the upload stage was reserved for");
  const std::size_t pixels = image_bytes(im.rows, im.row_elems);
  if (pixels + meta_bytes > buffer_.size())
    throw Error("image pass of " + std::to_string(pixels + meta_bytes) + " bytes does not fit the " +
                std::to_string(buffer_.size()) + "-byte upload stage");
  check_order(im);
  wait_for_stage();
  auto* stage = static_cast<std::uint16_t*>(buffer_.data());
  const std::size_t groups = im.rows / im.group_rows, group_elems = im.group_rows * im.row_elems;
  for (std::size_t slot = 0; slot < groups; ++slot) {
    const std::size_t g = im.group_order.empty() ? slot : std::size_t(im.group_order[slot]);
    const float* from = im.values + g * group_elems;
    std::uint16_t* to = stage + slot * group_elems;
    for (std::size_t i = 0; i < group_elems; ++i) to[i] = f32_to_bf16(from[i]);
  }
  unsigned char* meta_stage = static_cast<unsigned char*>(buffer_.data()) + pixels;
  if (meta_bytes) std::memcpy(meta_stage, meta, meta_bytes);
  guard_stream(stream);
  FS_CU(memcpy_htod_async, pixels_dst, buffer_.data(), pixels, stream);
  if (meta_bytes) FS_CU(memcpy_htod_async, meta_dst, meta_stage, meta_bytes, stream);
  record(stream);
  ++images_;
}

void ImageStage::upload_bytes(CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream) {
  const auto* from = static_cast<const unsigned char*>(src);
  for (std::size_t offset = 0; offset < bytes;) {
    const std::size_t piece = std::min(bytes - offset, buffer_.size());
    wait_for_stage();
    std::memcpy(buffer_.data(), from + offset, piece);
    guard_stream(stream);
    FS_CU(memcpy_htod_async, dst + offset, buffer_.data(), piece, stream);
    record(stream);
    offset += piece;
  }
}

}  // namespace fs::cuda

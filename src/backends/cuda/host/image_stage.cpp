// The reused pinned stage of image uploads.
#include "backends/cuda/host/image_stage.h"

#include <cstring>
#include <vector>

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
    : stage_(budget, image_bytes(max_rows, row_elems) + meta_bytes, what), max_rows_(max_rows), row_elems_(row_elems) {}

void ImageStage::upload_image(const ImageRows& im, CUdeviceptr pixels_dst, const void* meta, std::size_t meta_bytes,
                              CUdeviceptr meta_dst, CUstream stream) {
  if (im.row_elems != row_elems_)
    throw Error("image rows have " + std::to_string(im.row_elems) + " values, the stage was sized for " +
                std::to_string(row_elems_));
  if (im.rows > max_rows_)
    throw Error("image of " + std::to_string(im.rows) + " patches is larger than the " + std::to_string(max_rows_) +
                " patches the upload stage was reserved for");
  const std::size_t pixels = image_bytes(im.rows, im.row_elems);
  if (pixels + meta_bytes > stage_.capacity())
    throw Error("image pass of " + std::to_string(pixels + meta_bytes) + " bytes does not fit the " +
                std::to_string(stage_.capacity()) + "-byte upload stage");
  check_order(im);
  auto* stage = static_cast<std::uint16_t*>(stage_.acquire());
  const std::size_t groups = im.rows / im.group_rows, group_elems = im.group_rows * im.row_elems;
  for (std::size_t slot = 0; slot < groups; ++slot) {
    const std::size_t g = im.group_order.empty() ? slot : std::size_t(im.group_order[slot]);
    const float* from = im.values + g * group_elems;
    std::uint16_t* to = stage + slot * group_elems;
    for (std::size_t i = 0; i < group_elems; ++i) to[i] = f32_to_bf16(from[i]);
  }
  if (meta_bytes) std::memcpy(reinterpret_cast<unsigned char*>(stage) + pixels, meta, meta_bytes);
  const PinnedStage::Part parts[] = {{pixels_dst, 0, pixels}, {meta_dst, pixels, meta_bytes}};
  stage_.send(parts, stream);
  ++images_;
}

}  // namespace fs::cuda

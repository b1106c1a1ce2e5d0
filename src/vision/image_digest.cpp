#include "vision/image_digest.h"

#include "core/sha256.h"

namespace fs::vision {

namespace {

void put_u32(Sha256& h, uint32_t v) {
  const uint8_t b[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
  h.update(b, 4);
}

}  // namespace

ImageDigest image_digest(const RgbImage& image, const ImageGrid& grid) {
  Sha256 h;
  static const char tag[] = "foldserve-image-rgb8-v1";
  h.update(tag, sizeof tag - 1);
  put_u32(h, uint32_t(image.width));
  put_u32(h, uint32_t(image.height));
  put_u32(h, uint32_t(grid.t));
  put_u32(h, uint32_t(grid.h));
  put_u32(h, uint32_t(grid.w));
  h.update(image.pixels.data(), image.pixels.size());
  return h.finish();
}

std::string image_digest_hex(const ImageDigest& digest) { return Sha256::hex(digest); }

}  // namespace fs::vision

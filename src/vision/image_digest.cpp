#include "vision/image_digest.h"

#include <algorithm>
#include <vector>

#include "core/sha256.h"
#include "vision/parallel_rows.h"

namespace fs::vision {

namespace {

constexpr int kBandRows = 32;

void put_u32(Sha256& h, uint32_t v) {
  const uint8_t b[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
  h.update(b, 4);
}

}  // namespace

ImageDigest image_digest(const RgbImage& image, const ImageGrid& grid) {
  // The pixels are hashed in bands of rows fixed by the image, over the calling thread's pool, then the band hashes
  // in order: the digest does not depend on the thread count.
  const int bands = (std::max(image.height, 0) + kBandRows - 1) / kBandRows;
  const size_t row_bytes = size_t(std::max(image.width, 0)) * 3;
  std::vector<ImageDigest> band(static_cast<size_t>(bands));
  parallel_rows(bands, 1, [&](int b0, int b1) {
    for (int b = b0; b < b1; ++b) {
      const int rows = std::min(kBandRows, image.height - b * kBandRows);
      Sha256 h;
      h.update(image.pixels.data() + size_t(b) * size_t(kBandRows) * row_bytes, size_t(rows) * row_bytes);
      band[size_t(b)] = h.finish();
    }
  });
  Sha256 h;
  static const char tag[] = "foldserve-image-rgb8-v2";
  h.update(tag, sizeof tag - 1);
  put_u32(h, uint32_t(image.width));
  put_u32(h, uint32_t(image.height));
  put_u32(h, uint32_t(grid.t));
  put_u32(h, uint32_t(grid.h));
  put_u32(h, uint32_t(grid.w));
  for (const ImageDigest& d : band) h.update(d.data(), d.size());
  return h.finish();
}

std::string image_digest_hex(const ImageDigest& digest) { return Sha256::hex(digest); }

}  // namespace fs::vision

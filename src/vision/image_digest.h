#pragma once
// The prompt cache's key for an image: SHA-256 over the decoded pixels (hashed in bands of 32 rows, on the calling
// thread's pool), their size and the processed grid, so an image prefix is reused only for the same pixels at the
// same grid.
#include <array>
#include <cstdint>
#include <string>

#include "vision/image.h"
#include "vision/image_processor.h"

namespace fs::vision {

using ImageDigest = std::array<uint8_t, 32>;

ImageDigest image_digest(const RgbImage& image, const ImageGrid& grid);
std::string image_digest_hex(const ImageDigest& digest);

}  // namespace fs::vision

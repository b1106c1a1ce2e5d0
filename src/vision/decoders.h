#pragma once
// Per-format decoders behind decode_image; each checks dimensions against the limits before decoding pixels.
#include <cstdint>
#include <span>

#include "vision/image.h"

namespace fs::vision {

RgbImage decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits);
RgbImage decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits);
RgbImage decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits);

// Throws when width or height is not positive or their product exceeds the limit.
void check_dimensions(const char* format, int64_t width, int64_t height, const DecodeLimits& limits);

// EXIF orientation (1..8) from a JPEG's APP1 segment, 1 when absent or unreadable.
int jpeg_exif_orientation(std::span<const uint8_t> jpeg);
// Applies an EXIF orientation so the image shows upright (2..8 flip/rotate; others leave it unchanged).
RgbImage apply_exif_orientation(RgbImage image, int orientation);

}  // namespace fs::vision

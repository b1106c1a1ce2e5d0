#pragma once
// Decoded images as 8-bit RGB, and the limits every decoder checks before it decodes pixel data.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fs::vision {

// Interleaved RGB, row-major, 3 bytes per pixel, no row padding.
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;
  uint8_t at(int x, int y, int c) const { return pixels[(size_t(y) * size_t(width) + size_t(x)) * 3 + size_t(c)]; }
};

struct DecodeLimits {
  size_t max_bytes = 20u << 20;       // encoded size
  uint64_t max_pixels = 50'000'000;   // width × height, read from the header before decoding
};

enum class ImageFormat { Jpeg, Png, Webp, Gif, Svg, Bmp, Tiff, Avif, Heic, Video, Unknown };

// Format by magic bytes (SVG by its XML/`<svg` opening, video by MP4/WebM/AVI/... signatures).
ImageFormat sniff_image_format(std::span<const uint8_t> bytes);
const char* image_format_name(ImageFormat f);

// Sniffs and decodes JPEG (EXIF orientation applied), PNG and still WebP to RGB8. Everything else, and corrupt,
// truncated or oversized data, is refused with an fs::Error naming the reason.
RgbImage decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits = {});

}  // namespace fs::vision

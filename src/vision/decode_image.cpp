#include <string>

#include "core/error.h"
#include "vision/decoders.h"

namespace fs::vision {

void check_dimensions(const char* format, int64_t width, int64_t height, const DecodeLimits& limits) {
  if (width <= 0 || height <= 0)
    throw Error(std::string(format) + " image has invalid dimensions " + std::to_string(width) + "x" +
                std::to_string(height));
  if (uint64_t(width) * uint64_t(height) > limits.max_pixels)
    throw Error(std::string(format) + " image is " + std::to_string(width) + "x" + std::to_string(height) +
                ", more than the limit of " + std::to_string(limits.max_pixels) + " pixels");
}

RgbImage decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  if (bytes.empty()) throw Error("image data is empty");
  if (bytes.size() > limits.max_bytes)
    throw Error("image data is " + std::to_string(bytes.size()) + " bytes, more than the limit of " +
                std::to_string(limits.max_bytes));
  ImageFormat f = sniff_image_format(bytes);
  switch (f) {
    case ImageFormat::Jpeg: return decode_jpeg(bytes, limits);
    case ImageFormat::Png: return decode_png(bytes, limits);
    case ImageFormat::Webp: return decode_webp(bytes, limits);
    case ImageFormat::Unknown: throw Error("unsupported image data: not JPEG, PNG or WebP");
    case ImageFormat::Video: throw Error("video input is not supported; send JPEG, PNG or WebP images");
    default:
      throw Error(std::string(image_format_name(f)) + " images are not supported; send JPEG, PNG or WebP");
  }
}

}  // namespace fs::vision

#include <string>

#include <webp/decode.h>

#include "core/error.h"
#include "vision/alpha_composite.h"
#include "vision/decoders.h"

namespace fs::vision {

RgbImage decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  WebPBitstreamFeatures f;
  VP8StatusCode st = WebPGetFeatures(bytes.data(), bytes.size(), &f);
  if (st == VP8_STATUS_NOT_ENOUGH_DATA) throw Error("truncated WebP image");
  if (st != VP8_STATUS_OK) throw Error("corrupt WebP image (status " + std::to_string(int(st)) + ")");
  if (f.has_animation) throw Error("animated WebP images are not supported; send a still image");
  check_dimensions("WebP", f.width, f.height, limits);
  const size_t n = size_t(f.width) * size_t(f.height);
  if (f.has_alpha) {
    std::vector<uint8_t> rgba(n * 4);
    if (!WebPDecodeRGBAInto(bytes.data(), bytes.size(), rgba.data(), rgba.size(), f.width * 4))
      throw Error("corrupt or truncated WebP image");
    return composite_on_white(f.width, f.height, rgba);
  }
  RgbImage img{f.width, f.height, std::vector<uint8_t>(n * 3)};
  if (!WebPDecodeRGBInto(bytes.data(), bytes.size(), img.pixels.data(), img.pixels.size(), f.width * 3))
    throw Error("corrupt or truncated WebP image");
  return img;
}

}  // namespace fs::vision

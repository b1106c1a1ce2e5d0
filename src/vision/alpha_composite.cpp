#include "vision/alpha_composite.h"

namespace fs::vision {

RgbImage composite_on_white(int width, int height, const std::vector<uint8_t>& rgba) {
  constexpr uint32_t kPrecision = 7;
  RgbImage out{width, height, std::vector<uint8_t>(size_t(width) * size_t(height) * 3)};
  const size_t n = size_t(width) * size_t(height);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* s = &rgba[i * 4];
    uint32_t a = s[3];
    // White destination is opaque, so the output alpha is 255 and only the colour blend remains.
    uint32_t out_a255 = a * 255 + 255 * (255 - a);
    uint32_t coef1 = a * 255 * 255 * (1u << kPrecision) / out_a255;
    uint32_t coef2 = 255 * (1u << kPrecision) - coef1;
    for (int c = 0; c < 3; ++c) {
      uint32_t t = s[c] * coef1 + 255 * coef2 + (0x80u << kPrecision);
      out.pixels[i * 3 + size_t(c)] = uint8_t((((t >> 8) + t) >> 8) >> kPrecision);
    }
  }
  return out;
}

}  // namespace fs::vision

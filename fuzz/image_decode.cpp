// libFuzzer target: image sniffing and decoding (JPEG with EXIF, PNG, WebP) and data: URI payloads must refuse bad
// input with fs::Error and never crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "vision/image.h"
#include "vision/media_fetch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fs::vision::DecodeLimits limits;
  limits.max_pixels = 4'000'000;
  try {
    fs::vision::RgbImage img = fs::vision::decode_image({data, size}, limits);
    if (img.pixels.size() != size_t(img.width) * size_t(img.height) * 3) __builtin_trap();
  } catch (const fs::Error&) {
  }
  try {
    fs::vision::decode_data_uri("data:image/png;base64," + std::string(reinterpret_cast<const char*>(data), size), 1 << 20);
  } catch (const fs::Error&) {
  }
  return 0;
}

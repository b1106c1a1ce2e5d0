#include <memory>
#include <string>

#include <turbojpeg.h>

#include "core/error.h"
#include "vision/decoders.h"

namespace fs::vision {

namespace {

struct TjHandle {
  tjhandle h = tjInitDecompress();
  ~TjHandle() {
    if (h) tjDestroy(h);
  }
};

[[noreturn]] void fail(tjhandle h, const char* what) {
  throw Error(std::string("corrupt JPEG image (") + what + "): " + tjGetErrorStr2(h));
}

// libjpeg warnings that leave the picture whole; every other warning (premature end, corrupt data) refuses.
bool harmless_warning(const std::string& msg) { return msg.find("extraneous bytes") != std::string::npos; }

}  // namespace

RgbImage decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  TjHandle tj;
  if (!tj.h) throw Error("cannot start the JPEG decoder");
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.h, bytes.data(), static_cast<unsigned long>(bytes.size()), &width, &height, &subsamp,
                          &colorspace) != 0)
    fail(tj.h, "header");
  check_dimensions("JPEG", width, height, limits);
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK)
    throw Error("CMYK JPEG images are not supported; convert the image to RGB");
  RgbImage img{width, height, std::vector<uint8_t>(size_t(width) * size_t(height) * 3)};
  if (tjDecompress2(tj.h, bytes.data(), static_cast<unsigned long>(bytes.size()), img.pixels.data(), width, 0, height,
                    TJPF_RGB, TJFLAG_ACCURATEDCT) != 0) {
    std::string msg = tjGetErrorStr2(tj.h);
    if (tjGetErrorCode(tj.h) != TJERR_WARNING || !harmless_warning(msg))
      throw Error("corrupt or truncated JPEG image: " + msg);
  }
  return apply_exif_orientation(std::move(img), jpeg_exif_orientation(bytes));
}

}  // namespace fs::vision

#include <cstring>

#include "vision/decoders.h"

namespace fs::vision {

namespace {

// Bounds-checked reads of the TIFF structure inside an EXIF block.
struct TiffReader {
  const uint8_t* p;
  size_t n;
  bool little;
  bool u16(size_t off, uint32_t& v) const {
    if (off + 2 > n) return false;
    v = little ? uint32_t(p[off]) | uint32_t(p[off + 1]) << 8 : uint32_t(p[off]) << 8 | uint32_t(p[off + 1]);
    return true;
  }
  bool u32(size_t off, uint32_t& v) const {
    if (off + 4 > n) return false;
    uint32_t a, b;
    u16(off, a);
    u16(off + 2, b);
    v = little ? a | b << 16 : a << 16 | b;
    return true;
  }
};

int orientation_from_tiff(const uint8_t* p, size_t n) {
  if (n < 8) return 1;
  TiffReader r{p, n, p[0] == 'I' && p[1] == 'I'};
  if (!r.little && !(p[0] == 'M' && p[1] == 'M')) return 1;
  uint32_t magic, ifd, count;
  if (!r.u16(2, magic) || magic != 42 || !r.u32(4, ifd) || !r.u16(ifd, count)) return 1;
  for (uint32_t i = 0; i < count; ++i) {
    size_t entry = size_t(ifd) + 2 + size_t(i) * 12;
    uint32_t tag, type, value;
    if (!r.u16(entry, tag) || !r.u16(entry + 2, type)) return 1;
    if (tag == 0x0112 && type == 3 && r.u16(entry + 8, value)) return value >= 1 && value <= 8 ? int(value) : 1;
  }
  return 1;
}

}  // namespace

int jpeg_exif_orientation(std::span<const uint8_t> b) {
  size_t i = 2;  // after SOI
  while (i + 4 <= b.size() && b[i] == 0xFF) {
    uint8_t marker = b[i + 1];
    if (marker == 0xD9 || marker == 0xDA) break;  // end of image, start of scan: no more metadata
    size_t len = size_t(b[i + 2]) << 8 | b[i + 3];
    if (len < 2 || i + 2 + len > b.size()) break;
    const uint8_t* seg = b.data() + i + 4;
    size_t seg_len = len - 2;
    if (marker == 0xE1 && seg_len >= 6 && std::memcmp(seg, "Exif\0\0", 6) == 0)
      return orientation_from_tiff(seg + 6, seg_len - 6);
    i += 2 + len;
  }
  return 1;
}

RgbImage apply_exif_orientation(RgbImage in, int orientation) {
  if (orientation < 2 || orientation > 8) return in;
  const int W = in.width, H = in.height;
  const bool swap = orientation >= 5;
  RgbImage out{swap ? H : W, swap ? W : H, std::vector<uint8_t>(in.pixels.size())};
  for (int y = 0; y < out.height; ++y)
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;
      switch (orientation) {
        case 2: sx = W - 1 - x; break;                   // mirror left-right
        case 3: sx = W - 1 - x; sy = H - 1 - y; break;   // rotate 180
        case 4: sy = H - 1 - y; break;                   // mirror top-bottom
        case 5: sx = y; sy = x; break;                   // transpose
        case 6: sx = y; sy = H - 1 - x; break;           // rotate 90 clockwise
        case 7: sx = W - 1 - y; sy = H - 1 - x; break;   // transverse
        case 8: sx = W - 1 - y; sy = x; break;           // rotate 90 counter-clockwise
      }
      std::memcpy(&out.pixels[(size_t(y) * out.width + x) * 3], &in.pixels[(size_t(sy) * W + sx) * 3], 3);
    }
  return out;
}

}  // namespace fs::vision

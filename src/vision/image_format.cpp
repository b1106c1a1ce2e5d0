#include <algorithm>
#include <cstring>
#include <string_view>

#include "vision/image.h"

namespace fs::vision {

namespace {

bool starts_with(std::span<const uint8_t> b, std::string_view magic, size_t offset = 0) {
  return b.size() >= offset + magic.size() && std::memcmp(b.data() + offset, magic.data(), magic.size()) == 0;
}

// An XML or SVG document: optional BOM and whitespace, then `<?xml` or `<svg` (or a comment/doctype before it).
bool looks_like_svg(std::span<const uint8_t> b) {
  size_t i = starts_with(b, "\xEF\xBB\xBF") ? 3 : 0;
  while (i < b.size() && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n')) ++i;
  if (starts_with(b, "<svg", i) || starts_with(b, "<?xml", i)) return true;
  if (starts_with(b, "<!", i)) {
    std::string_view head(reinterpret_cast<const char*>(b.data()), std::min<size_t>(b.size(), 4096));
    return head.find("<svg") != std::string_view::npos;
  }
  return false;
}

}  // namespace

ImageFormat sniff_image_format(std::span<const uint8_t> b) {
  if (starts_with(b, "\xFF\xD8\xFF")) return ImageFormat::Jpeg;
  if (starts_with(b, "\x89PNG\r\n\x1A\n")) return ImageFormat::Png;
  if (starts_with(b, "RIFF") && starts_with(b, "WEBP", 8)) return ImageFormat::Webp;
  if (starts_with(b, "RIFF") && starts_with(b, "AVI ", 8)) return ImageFormat::Video;
  if (starts_with(b, "GIF87a") || starts_with(b, "GIF89a")) return ImageFormat::Gif;
  if (starts_with(b, "BM")) return ImageFormat::Bmp;
  if (starts_with(b, "II*\0") || starts_with(b, std::string_view("MM\0*", 4))) return ImageFormat::Tiff;
  if (starts_with(b, "ftyp", 4)) {
    if (starts_with(b, "avif", 8) || starts_with(b, "avis", 8)) return ImageFormat::Avif;
    if (starts_with(b, "heic", 8) || starts_with(b, "heix", 8) || starts_with(b, "mif1", 8)) return ImageFormat::Heic;
    return ImageFormat::Video;  // mp4, mov, 3gp, m4v
  }
  if (starts_with(b, "\x1A\x45\xDF\xA3")) return ImageFormat::Video;  // Matroska / WebM
  if (starts_with(b, std::string_view("\0\0\1\xBA", 4)) || starts_with(b, std::string_view("\0\0\1\xB3", 4)))
    return ImageFormat::Video;  // MPEG program / elementary stream
  if (starts_with(b, "OggS") || starts_with(b, "FLV")) return ImageFormat::Video;
  if (looks_like_svg(b)) return ImageFormat::Svg;
  return ImageFormat::Unknown;
}

const char* image_format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::Jpeg: return "JPEG";
    case ImageFormat::Png: return "PNG";
    case ImageFormat::Webp: return "WebP";
    case ImageFormat::Gif: return "GIF";
    case ImageFormat::Svg: return "SVG";
    case ImageFormat::Bmp: return "BMP";
    case ImageFormat::Tiff: return "TIFF";
    case ImageFormat::Avif: return "AVIF";
    case ImageFormat::Heic: return "HEIC";
    case ImageFormat::Video: return "video";
    case ImageFormat::Unknown: break;
  }
  return "unknown";
}

}  // namespace fs::vision

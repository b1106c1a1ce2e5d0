#include <gtest/gtest.h>

#include <png.h>
#include <turbojpeg.h>

#include <random>

#include "core/error.h"
#include "vision/decoders.h"
#include "vision/image.h"
#include "vision_fixtures.h"

namespace fs::vision {
namespace {

using Bytes = std::vector<uint8_t>;

std::string error_of(const Bytes& b, const DecodeLimits& limits = {}) {
  try {
    decode_image(b, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Bytes text_bytes(const std::string& s) { return {s.begin(), s.end()}; }

const char* kImages[] = {"grid224x168.png", "photo320x208.jpg", "odd97x61.webp", "wide640x400.png"};

TEST(Decode, SniffsFormatsByMagic) {
  FS_REQUIRE_SHARED(shared);
  EXPECT_EQ(sniff_image_format(test::file_bytes(shared / "images/grid224x168.png")), ImageFormat::Png);
  EXPECT_EQ(sniff_image_format(test::file_bytes(shared / "images/photo320x208.jpg")), ImageFormat::Jpeg);
  EXPECT_EQ(sniff_image_format(test::file_bytes(shared / "images/odd97x61.webp")), ImageFormat::Webp);
}

TEST(Decode, RefusesOtherFormatsByName) {
  EXPECT_NE(error_of(text_bytes("GIF89a\x01\x00\x01\x00\x00\x00\x00;")).find("GIF"), std::string::npos);
  EXPECT_NE(error_of(text_bytes("<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"/>")).find("SVG"),
            std::string::npos);
  EXPECT_NE(error_of(text_bytes("  <svg width=\"10\"></svg>")).find("SVG"), std::string::npos);
  EXPECT_NE(error_of(text_bytes(std::string("\0\0\0\x18" "ftypisom\0\0\0\0", 16))).find("video"), std::string::npos);
  EXPECT_NE(error_of(text_bytes("\x1A\x45\xDF\xA3webm")).find("video"), std::string::npos);
  EXPECT_NE(error_of(text_bytes("BM\x36\0\0\0")).find("BMP"), std::string::npos);
  EXPECT_NE(error_of(text_bytes("hello world")).find("not JPEG, PNG or WebP"), std::string::npos);
  EXPECT_NE(error_of({}).find("empty"), std::string::npos);
}

TEST(Decode, RefusesTruncatedFixtures) {
  FS_REQUIRE_SHARED(shared);
  for (const char* name : kImages) {
    Bytes full = test::file_bytes(shared / "images" / name);
    for (size_t keep : {size_t(12), size_t(40), full.size() / 3, full.size() / 2, full.size() - 2}) {
      Bytes cut(full.begin(), full.begin() + long(keep));
      EXPECT_FALSE(error_of(cut).empty()) << name << " cut to " << keep;
    }
  }
}

TEST(Decode, CorruptBytesNeverCrash) {
  FS_REQUIRE_SHARED(shared);
  std::mt19937 rng(7);
  for (const char* name : kImages) {
    Bytes full = test::file_bytes(shared / "images" / name);
    for (int trial = 0; trial < 40; ++trial) {
      Bytes b = full;
      for (int k = 0; k < 4; ++k) b[8 + rng() % (b.size() - 8)] ^= uint8_t(1 + rng() % 255);
      try {
        RgbImage img = decode_image(b);
        EXPECT_EQ(img.pixels.size(), size_t(img.width) * size_t(img.height) * 3);
      } catch (const Error&) {
      }
    }
  }
  // A flipped byte inside PNG image data fails its CRC.
  Bytes png = test::file_bytes(shared / "images/grid224x168.png");
  png[png.size() / 2] ^= 0x55;
  EXPECT_FALSE(error_of(png).empty());
}

TEST(Decode, PixelAndByteLimitsAreCheckedFirst) {
  FS_REQUIRE_SHARED(shared);
  for (const char* name : kImages) {
    Bytes b = test::file_bytes(shared / "images" / name);
    DecodeLimits small;
    small.max_pixels = 1000;
    EXPECT_NE(error_of(b, small).find("more than the limit"), std::string::npos) << name;
    DecodeLimits few_bytes;
    few_bytes.max_bytes = 100;
    EXPECT_NE(error_of(b, few_bytes).find("bytes"), std::string::npos) << name;
  }
}

TEST(Decode, RefusesAnimatedWebp) {
  // RIFF/WEBP with a VP8X chunk whose animation flag is set (canvas 16x16).
  Bytes b = text_bytes("RIFF");
  const uint8_t size[4] = {22, 0, 0, 0};
  b.insert(b.end(), size, size + 4);
  for (char c : std::string("WEBPVP8X")) b.push_back(uint8_t(c));
  const uint8_t chunk[14] = {10, 0, 0, 0, 0x02, 0, 0, 0, 15, 0, 0, 15, 0, 0};
  b.insert(b.end(), chunk, chunk + 14);
  EXPECT_NE(error_of(b).find("animated"), std::string::npos) << error_of(b);
}

// Encodes a PNG with libpng from rows of the given colour type and bit depth.
Bytes encode_png(int w, int h, int color, int depth, const Bytes& raw, const std::vector<png_color>& palette = {},
                 const Bytes& trns = {}) {
  Bytes out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(
      png, &out, [](png_structp p, png_bytep d, png_size_t n) {
        auto* o = static_cast<Bytes*>(png_get_io_ptr(p));
        o->insert(o->end(), d, d + n);
      },
      nullptr);
  png_set_IHDR(png, info, png_uint_32(w), png_uint_32(h), depth, color, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), int(palette.size()));
  if (!trns.empty()) png_set_tRNS(png, info, trns.data(), int(trns.size()), nullptr);
  png_write_info(png, info);
  const size_t stride = raw.size() / size_t(h);
  for (int y = 0; y < h; ++y) png_write_row(png, raw.data() + size_t(y) * stride);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

TEST(Decode, PngGrayPaletteAlphaAnd16BitBecomeRgb8) {
  RgbImage g = decode_image(encode_png(2, 1, PNG_COLOR_TYPE_GRAY, 8, {10, 200}));
  EXPECT_EQ(g.pixels, (Bytes{10, 10, 10, 200, 200, 200}));
  // Palette entry 1 is fully transparent → white background.
  RgbImage p = decode_image(encode_png(2, 1, PNG_COLOR_TYPE_PALETTE, 8, {0, 1}, {{1, 2, 3}, {9, 9, 9}}, {255, 0}));
  EXPECT_EQ(p.pixels, (Bytes{1, 2, 3, 255, 255, 255}));
  // 16-bit samples keep their high byte.
  RgbImage s = decode_image(encode_png(1, 1, PNG_COLOR_TYPE_RGB, 16, {0x12, 0x34, 0xAB, 0xCD, 0xFF, 0x00}));
  EXPECT_EQ(s.pixels, (Bytes{0x12, 0xAB, 0xFF}));
  // RGBA: opaque keeps the colour, transparent is white, half-transparent black is mid-grey.
  RgbImage a = decode_image(encode_png(3, 1, PNG_COLOR_TYPE_RGBA, 8, {5, 6, 7, 255, 5, 6, 7, 0, 0, 0, 0, 128}));
  EXPECT_EQ(Bytes(a.pixels.begin(), a.pixels.begin() + 6), (Bytes{5, 6, 7, 255, 255, 255}));
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(a.pixels[size_t(6 + c)], 127, 1);
  RgbImage la = decode_image(encode_png(1, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, {40, 255}));
  EXPECT_EQ(la.pixels, (Bytes{40, 40, 40}));
}

TEST(Decode, JpegExifOrientationIsApplied) {
  // 32x16: left half red, right half blue.
  const int W = 32, H = 16;
  Bytes rgb(size_t(W * H * 3));
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      uint8_t* p = &rgb[size_t((y * W + x) * 3)];
      p[0] = x < W / 2 ? 255 : 0;
      p[2] = x < W / 2 ? 0 : 255;
    }
  tjhandle tj = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(tj, rgb.data(), W, 0, H, TJPF_RGB, &jpeg, &size, TJSAMP_444, 95, 0), 0);
  Bytes plain(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(tj);
  // APP1 "Exif\0\0" + big-endian TIFF with one IFD entry: orientation (0x0112, SHORT, 1) = 6.
  const uint8_t exif[] = {0xFF, 0xE1, 0, 34, 'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8,
                          0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0};
  Bytes rotated(plain.begin(), plain.begin() + 2);
  rotated.insert(rotated.end(), exif, exif + sizeof exif);
  rotated.insert(rotated.end(), plain.begin() + 2, plain.end());
  EXPECT_EQ(jpeg_exif_orientation(rotated), 6);
  RgbImage up = decode_image(plain);
  EXPECT_EQ(up.width, W);
  RgbImage img = decode_image(rotated);
  ASSERT_EQ(img.width, H);
  ASSERT_EQ(img.height, W);
  // Rotated 90° clockwise: the left (red) half is now on top.
  EXPECT_GT(img.at(H / 2, W / 4, 0), 200);
  EXPECT_LT(img.at(H / 2, W / 4, 2), 60);
  EXPECT_GT(img.at(H / 2, 3 * W / 4, 2), 200);
  EXPECT_LT(img.at(H / 2, 3 * W / 4, 0), 60);
}

TEST(Decode, ExifOrientationsMapCorners) {
  // 2x1 image: pixel A at left, B at right.
  RgbImage src{2, 1, {1, 1, 1, 2, 2, 2}};
  EXPECT_EQ(apply_exif_orientation(src, 2).pixels, (Bytes{2, 2, 2, 1, 1, 1}));
  RgbImage r6 = apply_exif_orientation(src, 6);
  EXPECT_EQ(r6.width, 1);
  EXPECT_EQ(r6.pixels, (Bytes{1, 1, 1, 2, 2, 2}));  // left end goes to the top
  RgbImage r8 = apply_exif_orientation(src, 8);
  EXPECT_EQ(r8.pixels, (Bytes{2, 2, 2, 1, 1, 1}));  // right end goes to the top
}

}  // namespace
}  // namespace fs::vision

#include <csetjmp>
#include <cstring>
#include <string>

#include <png.h>

#include "core/error.h"
#include "vision/alpha_composite.h"
#include "vision/decoders.h"

namespace fs::vision {

namespace {

struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t pos;
  char error[256];
};

void read_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) png_error(png, "truncated PNG data");
  std::memcpy(out, src->data + src->pos, n);
  src->pos += n;
}

void on_error(png_structp png, png_const_charp msg) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->error, sizeof src->error, "%s", msg);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

// Everything that must be released whether decoding finishes or jumps out.
struct PngReader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngReader() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

}  // namespace

RgbImage decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  PngSource src{bytes.data(), bytes.size(), 0, {}};
  PngReader r;
  r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, on_error, on_warning);
  if (!r.png) throw Error("cannot start the PNG decoder");
  r.info = png_create_info_struct(r.png);
  if (!r.info) throw Error("cannot start the PNG decoder");
  // Declared before setjmp so a jump never skips their construction; sized only after the header is checked.
  std::vector<uint8_t> rgba;
  std::vector<png_bytep> rows;
  png_uint_32 width = 0, height = 0;
  bool too_large = false;
  if (setjmp(png_jmpbuf(r.png))) throw Error(std::string("corrupt or truncated PNG image: ") + src.error);
  png_set_read_fn(r.png, &src, read_bytes);
  png_set_user_limits(r.png, 0x7fffffff, 0x7fffffff);
  png_read_info(r.png, r.info);
  width = png_get_image_width(r.png, r.info);
  height = png_get_image_height(r.png, r.info);
  too_large = uint64_t(width) * uint64_t(height) > limits.max_pixels;
  if (too_large || width == 0 || height == 0) {
    // Leave the setjmp scope before throwing, with the reader cleaned up by its destructor.
  } else {
    int color = png_get_color_type(r.png, r.info);
    png_set_expand(r.png);          // palette → RGB, gray below 8 bits → 8, tRNS → alpha
    png_set_strip_16(r.png);        // 16-bit samples keep their high byte
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(r.png);
    png_set_add_alpha(r.png, 0xFF, PNG_FILLER_AFTER);
    png_set_interlace_handling(r.png);
    png_read_update_info(r.png, r.info);
    if (png_get_rowbytes(r.png, r.info) != size_t(width) * 4) png_error(r.png, "unexpected row layout");
    rgba.resize(size_t(width) * size_t(height) * 4);
    rows.resize(height);
    for (png_uint_32 y = 0; y < height; ++y) rows[y] = rgba.data() + size_t(y) * width * 4;
    png_read_image(r.png, rows.data());
    png_read_end(r.png, nullptr);
  }
  check_dimensions("PNG", int64_t(width), int64_t(height), limits);
  return composite_on_white(int(width), int(height), rgba);
}

}  // namespace fs::vision

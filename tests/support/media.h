#pragma once
// Images for tests that send them: base64 and data: URIs, and RGB pixels written as PNG by libpng.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fs::test {

std::string base64(std::string_view bytes);
// "data:TYPE;base64,..." of `bytes`.
std::string data_uri(std::string_view bytes, const std::string& type);
// `rgb` (width × height × 3 bytes) as a PNG file's bytes; empty when libpng fails.
std::string encode_png_rgb(int width, int height, const std::vector<uint8_t>& rgb);

}  // namespace fs::test

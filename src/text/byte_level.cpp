#include "text/byte_level.h"

#include <array>

#include "text/utf8.h"

namespace fs::text {
namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> encoded;
  std::array<int, 324> to_byte{};  // code points stay below 256 + 68
  Tables() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      append_utf8(encoded[b], to_char[b]);
      to_byte[to_char[b]] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string bytes_to_byte_level(std::string_view s) {
  const auto& t = tables();
  std::string out;
  out.reserve(s.size() * 2);
  for (unsigned char b : s) out += t.encoded[b];
  return out;
}

bool byte_level_to_bytes(std::string_view s, std::string& out) {
  const auto& t = tables();
  size_t old = out.size();
  for (size_t i = 0; i < s.size();) {
    size_t n = valid_sequence_length(s, i);
    if (!n) {
      out.resize(old);
      return false;
    }
    char32_t c = next_code_point(s, i);
    if (c >= t.to_byte.size() || t.to_byte[c] < 0) {
      out.resize(old);
      return false;
    }
    out += static_cast<char>(t.to_byte[c]);
  }
  return true;
}

}  // namespace fs::text

#include <cctype>

#include "core/error.h"
#include "vision/media_fetch.h"

namespace fs::vision {

namespace {

int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::vector<uint8_t> base64_decode(const std::string& text, size_t max_bytes) {
  std::vector<uint8_t> out;
  out.reserve(std::min(text.size() / 4 * 3 + 3, max_bytes + 3));
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (unsigned char c : text) {
    if (std::isspace(c)) continue;
    if (c == '=') {
      ++pad;
      continue;
    }
    int v = base64_value(c);
    if (v < 0 || pad) throw Error("invalid base64 in data: URI");
    acc = acc << 6 | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(uint8_t(acc >> bits));
      if (out.size() > max_bytes)
        throw Error("data: URI payload is larger than the limit of " + std::to_string(max_bytes) + " bytes");
    }
  }
  if (pad > 2 || bits >= 6) throw Error("invalid base64 in data: URI (truncated)");
  return out;
}

FetchedMedia decode_data_uri(const std::string& uri, size_t max_bytes) {
  if (uri.compare(0, 5, "data:") != 0) throw Error("not a data: URI");
  size_t comma = uri.find(',');
  if (comma == std::string::npos) throw Error("data: URI has no ',' before its payload");
  std::string meta = uri.substr(5, comma - 5);
  FetchedMedia m;
  bool base64 = false;
  if (meta.size() >= 7 && meta.compare(meta.size() - 7, 7, ";base64") == 0) {
    base64 = true;
    meta.resize(meta.size() - 7);
  }
  m.content_type = meta.substr(0, meta.find(';'));
  std::string payload = uri.substr(comma + 1);
  if (base64) {
    m.bytes = base64_decode(payload, max_bytes);
  } else {
    for (size_t i = 0; i < payload.size(); ++i) {
      if (payload[i] == '%') {
        int hi = i + 2 < payload.size() ? hex_value(payload[i + 1]) : -1;
        int lo = i + 2 < payload.size() ? hex_value(payload[i + 2]) : -1;
        if (hi < 0 || lo < 0) throw Error("invalid percent-escape in data: URI");
        m.bytes.push_back(uint8_t(hi << 4 | lo));
        i += 2;
      } else {
        m.bytes.push_back(uint8_t(payload[i]));
      }
      if (m.bytes.size() > max_bytes)
        throw Error("data: URI payload is larger than the limit of " + std::to_string(max_bytes) + " bytes");
    }
  }
  if (m.bytes.empty()) throw Error("data: URI has an empty payload");
  return m;
}

}  // namespace fs::vision

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "vision/media_fetch.h"

namespace fs::vision {

namespace {

bool v4_non_public(const uint8_t a[4]) {
  const uint32_t ip = uint32_t(a[0]) << 24 | uint32_t(a[1]) << 16 | uint32_t(a[2]) << 8 | a[3];
  auto in = [&](uint32_t net, int bits) { return bits == 0 || (ip >> (32 - bits)) == (net >> (32 - bits)); };
  return in(0x00000000, 8)        // "this" network
         || in(0x0A000000, 8)     // 10/8 private
         || in(0x64400000, 10)    // 100.64/10 carrier-grade NAT
         || in(0x7F000000, 8)     // loopback
         || in(0xA9FE0000, 16)    // link-local (cloud metadata)
         || in(0xAC100000, 12)    // 172.16/12 private
         || in(0xC0000000, 24)    // IETF protocol assignments
         || in(0xC0000200, 24)    // TEST-NET-1
         || in(0xC0A80000, 16)    // 192.168/16 private
         || in(0xC6120000, 15)    // benchmarking
         || in(0xC6336400, 24)    // TEST-NET-2
         || in(0xCB007100, 24)    // TEST-NET-3
         || in(0xE0000000, 4)     // multicast
         || in(0xF0000000, 4);    // reserved and broadcast
}

bool v6_non_public(const uint8_t a[16]) {
  static const uint8_t zero[16] = {};
  if (std::memcmp(a, zero, 15) == 0 && (a[15] == 0 || a[15] == 1)) return true;  // unspecified, loopback
  if ((a[0] & 0xFE) == 0xFC) return true;                                         // fc00::/7 unique-local
  if (a[0] == 0xFE && (a[1] & 0xC0) == 0x80) return true;                         // fe80::/10 link-local
  if (a[0] == 0xFE && (a[1] & 0xC0) == 0xC0) return true;                         // fec0::/10 site-local
  if (a[0] == 0xFF) return true;                                                  // multicast
  if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0D && a[3] == 0xB8) return true;  // documentation
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  static const uint8_t nat64[12] = {0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(a, mapped, 12) == 0 || std::memcmp(a, nat64, 12) == 0 || std::memcmp(a, zero, 12) == 0)
    return v4_non_public(a + 12);  // ::ffff:a.b.c.d, 64:ff9b::a.b.c.d, ::a.b.c.d
  if (a[0] == 0x20 && a[1] == 0x02) return v4_non_public(a + 2);  // 6to4 embeds an IPv4 address
  return false;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  while (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

bool is_non_public_address(const std::string& addr) {
  uint8_t buf[16];
  std::string a = addr;
  if (!a.empty() && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
  if (inet_pton(AF_INET, a.c_str(), buf) == 1) return v4_non_public(buf);
  if (inet_pton(AF_INET6, a.c_str(), buf) == 1) return v6_non_public(buf);
  return true;  // not a numeric address: never treated as public
}

bool domain_allowed(const std::string& host, const std::vector<std::string>& allowed) {
  if (allowed.empty()) return true;
  const std::string h = lower(host);
  for (const auto& entry : allowed) {
    std::string d = lower(entry);
    if (!d.empty() && d.front() == '.') d.erase(0, 1);
    if (d.empty()) continue;
    if (h == d || (h.size() > d.size() && h.compare(h.size() - d.size(), d.size(), d) == 0 &&
                   h[h.size() - d.size() - 1] == '.'))
      return true;
  }
  return false;
}

}  // namespace fs::vision

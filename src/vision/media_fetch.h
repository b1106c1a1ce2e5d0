#pragma once
// Fetching image bytes named by a URL: `data:` URIs (base64 or percent-encoded) and http(s) through libcurl with
// size and time limits, bounded redirects, an optional domain allow-list, and private, loopback and link-local
// addresses refused unless allowed. Every hop is resolved first, every address checked, and the connection
// pinned to the checked addresses so a second DNS answer cannot move it.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace fs::vision {

struct MediaFetchOptions {
  size_t max_bytes = 20u << 20;
  std::chrono::milliseconds timeout{15000};  // whole fetch, redirects included
  int max_redirects = 3;
  bool allow_local = false;                  // loopback, private, link-local, unique-local and similar ranges
  std::vector<std::string> allowed_domains;  // empty → any; "example.com" also allows its subdomains
};

struct FetchedMedia {
  std::vector<uint8_t> bytes;
  std::string content_type;  // as sent (data: media type or the Content-Type header), informational
};

// Throws fs::Error with a message fit for a 400 reply.
FetchedMedia fetch_media(const std::string& url, const MediaFetchOptions& options);

// The payload of a data: URI.
FetchedMedia decode_data_uri(const std::string& uri, size_t max_bytes);

// Standard base64 (padding optional, whitespace ignored); throws on any other character.
std::vector<uint8_t> base64_decode(const std::string& text, size_t max_bytes);

// True for addresses a server must not be tricked into reaching: loopback, private, link-local, CGNAT,
// unique-local, multicast, unspecified, reserved, and IPv4 embedded in IPv6 forms of those.
bool is_non_public_address(const std::string& numeric_address);

// Host matches an entry of the allow-list exactly or as a subdomain (case-insensitive).
bool domain_allowed(const std::string& host, const std::vector<std::string>& allowed);

}  // namespace fs::vision

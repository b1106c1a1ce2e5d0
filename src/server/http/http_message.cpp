#include "server/http/http_message.h"

#include <algorithm>
#include <cctype>

namespace fs::http {
namespace {

std::string_view find_header(const Headers& headers, std::string_view name) {
  const std::string key = to_lower(name);
  for (const auto& [k, v] : headers)
    if (k == key) return v;
  return {};
}

bool has_token(std::string_view list, std::string_view token) {
  const std::string lower = to_lower(list);
  size_t start = 0;
  while (start <= lower.size()) {
    size_t comma = lower.find(',', start);
    if (comma == std::string::npos) comma = lower.size();
    std::string_view item(lower.data() + start, comma - start);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item == token) return true;
    start = comma + 1;
  }
  return false;
}

}  // namespace

std::string to_lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

std::string_view Request::header(std::string_view name) const { return find_header(headers, name); }

bool Request::has_header(std::string_view name) const {
  const std::string key = to_lower(name);
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return h.first == key; });
}

bool Request::wants_keep_alive() const {
  std::string_view connection = header("connection");
  if (has_token(connection, "close")) return false;
  return minor_version >= 1 || has_token(connection, "keep-alive");
}

void Response::set_header(std::string name, std::string value) {
  name = to_lower(name);
  for (auto& [k, v] : headers)
    if (k == name) {
      v = std::move(value);
      return;
    }
  headers.emplace_back(std::move(name), std::move(value));
}

void Response::set_content(std::string content, std::string content_type) {
  body = std::move(content);
  set_header("content-type", std::move(content_type));
}

void Response::set_stream(std::string content_type, std::function<bool(ChunkSink&)> provider,
                          std::function<void(bool)> on_end) {
  set_header("content-type", std::move(content_type));
  stream = std::move(provider);
  on_stream_end = std::move(on_end);
}

std::string_view Response::header(std::string_view name) const { return find_header(headers, name); }

const char* status_text(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

}  // namespace fs::http

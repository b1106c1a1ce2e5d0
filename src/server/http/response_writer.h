#pragma once
// Puts a response on the wire: the status line and headers, then the whole body, or the stream in chunks
// (HTTP/1.1) or until close (HTTP/1.0).
#include <atomic>
#include <chrono>
#include <string>

#include "server/http/http_message.h"

namespace fs::http {

// The status line and headers; `length` is the body's size, or -1 for a streamed body.
std::string response_head(const Response& res, int minor_version, long long length, bool keep_alive);
// The whole response (a body, not a stream) as bytes; HEAD requests get the head only.
std::string serialize_whole(const Response& res, const Request& req, bool keep_alive);

// Writes `res` to `fd`; false when the connection must close (a failed write, a stream the client left, or
// `stopping` set). Each write may wait up to `write_timeout`.
bool write_response(int fd, const Request& req, Response& res, bool keep_alive,
                    std::chrono::milliseconds write_timeout, const std::atomic<bool>& stopping);

}  // namespace fs::http

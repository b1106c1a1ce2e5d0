#include "server/http/response_writer.h"

#include <cstdio>

#include "server/http/socket_io.h"

namespace fs::http {
namespace {

using Clock = std::chrono::steady_clock;

class SocketChunkSink : public ChunkSink {
 public:
  SocketChunkSink(int fd, bool chunked, std::chrono::milliseconds timeout, const std::atomic<bool>& stopping)
      : fd_(fd), chunked_(chunked), timeout_(timeout), stopping_(stopping) {}

  bool write(std::string_view data) override {
    if (failed_ || stopping_.load()) return !(failed_ = true);
    if (data.empty()) return true;
    std::string framed;
    if (chunked_) {
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", data.size());
      framed.reserve(data.size() + 40);
      framed.append(size).append(data).append("\r\n");
      data = framed;
    }
    if (!send_all(fd_, data, Clock::now() + timeout_)) failed_ = true;
    return !failed_;
  }
  bool failed() const { return failed_; }

 private:
  int fd_;
  bool chunked_;
  std::chrono::milliseconds timeout_;
  const std::atomic<bool>& stopping_;
  bool failed_ = false;
};

}  // namespace

std::string response_head(const Response& res, int minor_version, long long length, bool keep_alive) {
  std::string head = "HTTP/1." + std::to_string(minor_version) + " " + std::to_string(res.status) + " " +
                     status_text(res.status) + "\r\n";
  for (const auto& [k, v] : res.headers) head += k + ": " + v + "\r\n";
  if (length >= 0) head += "content-length: " + std::to_string(length) + "\r\n";
  else if (minor_version >= 1) head += "transfer-encoding: chunked\r\n";
  head += keep_alive ? "connection: keep-alive\r\n" : "connection: close\r\n";
  head += "\r\n";
  return head;
}

std::string serialize_whole(const Response& res, const Request& req, bool keep_alive) {
  std::string out = response_head(res, req.minor_version, (long long)res.body.size(), keep_alive);
  if (req.method != "HEAD") out += res.body;
  return out;
}

bool write_response(int fd, const Request& req, Response& res, bool keep_alive, std::chrono::milliseconds timeout,
                    const std::atomic<bool>& stopping) {
  if (!res.stream || req.method == "HEAD") {
    if (res.stream && res.on_stream_end) res.on_stream_end(false);
    return send_all(fd, serialize_whole(res, req, keep_alive), Clock::now() + timeout) && keep_alive;
  }
  // An HTTP/1.0 client reads a stream until the connection closes.
  const bool chunked = req.minor_version >= 1;
  keep_alive = keep_alive && chunked;
  SocketChunkSink sink(fd, chunked, timeout, stopping);
  bool completed = send_all(fd, response_head(res, req.minor_version, -1, keep_alive), Clock::now() + timeout);
  while (completed && !sink.is_done()) {
    if (!res.stream(sink) || sink.failed()) completed = false;
  }
  if (completed && chunked) completed = send_all(fd, "0\r\n\r\n", Clock::now() + timeout);
  if (res.on_stream_end) res.on_stream_end(completed);
  return completed && keep_alive;
}

}  // namespace fs::http

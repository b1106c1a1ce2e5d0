#pragma once
// One HTTP request as parsed, and the response a handler fills: a whole body or a stream of chunks.
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fs::http {

using Headers = std::vector<std::pair<std::string, std::string>>;  // names in lower case

struct Request {
  std::string method, target, path, query;
  int minor_version = 1;  // HTTP/1.minor
  Headers headers;
  std::string body;
  std::string remote_addr;
  std::vector<std::string> params;  // path parts captured by the route pattern
  // True once the client has closed its connection (set on worker threads; empty elsewhere).
  std::function<bool()> client_gone;

  // The first value of header `name` (any case), or "" when absent.
  std::string_view header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  // Whether the connection stays open after this request (HTTP/1.1 default, HTTP/1.0 on request).
  bool wants_keep_alive() const;
};

// Where a streaming handler writes its chunks; write() is false once the client has gone.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  virtual bool write(std::string_view data) = 0;
  // Ends the stream after this call of the provider.
  void done() { done_ = true; }
  bool is_done() const { return done_; }

 private:
  bool done_ = false;
};

struct Response {
  int status = 200;
  Headers headers;
  std::string body;
  // A streamed body: called again and again on the worker thread until it calls sink.done() or returns false.
  std::function<bool(ChunkSink&)> stream;
  // Runs once after a stream ends; `completed` is false when the client left or a write failed.
  std::function<void(bool completed)> on_stream_end;

  void set_header(std::string name, std::string value);
  void set_content(std::string content, std::string content_type);
  void set_stream(std::string content_type, std::function<bool(ChunkSink&)> provider,
                  std::function<void(bool)> on_end);
  std::string_view header(std::string_view name) const;
};

// The reason phrase of a status code ("OK", "Not Found", ...).
const char* status_text(int status);
// ASCII lower case.
std::string to_lower(std::string_view s);

}  // namespace fs::http

#pragma once
// An incremental HTTP/1.x request parser: bytes in as they arrive, a request out once its head and body are
// whole. Limits are enforced as bytes arrive (head size, body size, chunked or not), so nothing unbounded is
// buffered; bytes past one request stay buffered for the next (pipelining).
#include <cstddef>
#include <string>
#include <string_view>

#include "server/http/http_message.h"

namespace fs::http {

struct ParserLimits {
  size_t max_head_bytes = 64 << 10;  // request line and headers
  size_t max_body_bytes = 8 << 20;   // the decoded body
};

class RequestParser {
 public:
  enum class State { NeedMore, HeadReady, Complete, Failed };

  explicit RequestParser(ParserLimits limits) : limits_(limits) {}

  // Appends bytes and parses as far as they go. HeadReady is returned once per request, when the head is whole
  // and the body is not yet; call parse() to go on.
  State feed(std::string_view bytes);
  State parse();
  State state() const { return state_; }

  Request& request() { return request_; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }
  // Whether any byte of the current request has arrived.
  bool started() const { return started_; }
  bool has_buffered() const { return pos_ < buffer_.size(); }
  // Whether the body is framed by chunks (or a length); used to decide on 100-continue.
  bool body_expected() const { return chunked_ || content_length_ > 0; }
  // Starts the next request on the same connection, keeping the bytes already received past this one.
  void next();

 private:
  enum class Phase { Head, Length, ChunkSize, ChunkData, ChunkEnd, Trailers, Done, Error };

  State fail(int status, std::string message);
  State parse_head();
  bool parse_request_line(std::string_view line);
  bool parse_header_line(std::string_view line);
  State finish_head();
  // The next line (without CR LF) if one is whole in the buffer.
  bool take_line(std::string_view& line);

  ParserLimits limits_;
  std::string buffer_;
  size_t pos_ = 0;
  size_t head_bytes_ = 0;
  Phase phase_ = Phase::Head;
  State state_ = State::NeedMore;
  bool started_ = false;
  bool request_line_seen_ = false;
  bool chunked_ = false;
  size_t content_length_ = 0;
  size_t chunk_left_ = 0;
  Request request_;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace fs::http

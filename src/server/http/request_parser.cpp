#include "server/http/request_parser.h"

#include <cctype>
#include <charconv>

namespace fs::http {
namespace {

constexpr size_t kMaxChunkLine = 1024;

bool is_token_char(unsigned char c) {
  return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!is_token_char(c)) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes a path; false on a malformed escape.
bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = hex_digit(in[i + 1]), lo = hex_digit(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += char(hi * 16 + lo);
    i += 2;
  }
  return true;
}

}  // namespace

RequestParser::State RequestParser::fail(int status, std::string message) {
  phase_ = Phase::Error;
  error_status_ = status;
  error_message_ = std::move(message);
  return state_ = State::Failed;
}

RequestParser::State RequestParser::feed(std::string_view bytes) {
  if (phase_ == Phase::Error) return state_;
  if (pos_ > 0 && pos_ >= buffer_.size() / 2) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  buffer_.append(bytes);
  return parse();
}

bool RequestParser::take_line(std::string_view& line) {
  size_t nl = buffer_.find('\n', pos_);
  if (nl == std::string::npos) return false;
  line = std::string_view(buffer_).substr(pos_, nl - pos_);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  pos_ = nl + 1;
  return true;
}

RequestParser::State RequestParser::parse() {
  if (phase_ == Phase::Error || phase_ == Phase::Done) return state_;
  if (pos_ < buffer_.size()) started_ = true;
  if (phase_ == Phase::Head) {
    State s = parse_head();
    if (s != State::HeadReady) return s;
    if (phase_ != Phase::Done) return state_ = State::HeadReady;
  }
  while (phase_ != Phase::Done && phase_ != Phase::Error) {
    if (phase_ == Phase::Length) {
      size_t take = std::min(content_length_ - request_.body.size(), buffer_.size() - pos_);
      request_.body.append(buffer_, pos_, take);
      pos_ += take;
      if (request_.body.size() < content_length_) return state_ = State::NeedMore;
      phase_ = Phase::Done;
    } else if (phase_ == Phase::ChunkSize) {
      std::string_view line;
      size_t nl = buffer_.find('\n', pos_);
      if (nl == std::string::npos) {
        if (buffer_.size() - pos_ > kMaxChunkLine) return fail(400, "a chunk size line is too long");
        return state_ = State::NeedMore;
      }
      if (nl - pos_ > kMaxChunkLine) return fail(400, "a chunk size line is too long");
      take_line(line);
      std::string_view digits = line.substr(0, line.find(';'));
      digits = trim(digits);
      size_t size = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size, 16);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
        return fail(400, "a chunk size is not a hexadecimal number");
      if (size > limits_.max_body_bytes - request_.body.size()) return fail(413, "the request body is too large");
      chunk_left_ = size;
      phase_ = size == 0 ? Phase::Trailers : Phase::ChunkData;
    } else if (phase_ == Phase::ChunkData) {
      size_t take = std::min(chunk_left_, buffer_.size() - pos_);
      request_.body.append(buffer_, pos_, take);
      pos_ += take;
      chunk_left_ -= take;
      if (chunk_left_ > 0) return state_ = State::NeedMore;
      phase_ = Phase::ChunkEnd;
    } else if (phase_ == Phase::ChunkEnd) {
      std::string_view line;
      if (!take_line(line)) {
        if (buffer_.size() - pos_ >= 2) return fail(400, "a chunk is longer than its size");
        return state_ = State::NeedMore;
      }
      if (!line.empty()) return fail(400, "a chunk is longer than its size");
      phase_ = Phase::ChunkSize;
    } else if (phase_ == Phase::Trailers) {
      std::string_view line;
      size_t nl = buffer_.find('\n', pos_);
      if (nl == std::string::npos) {
        if (buffer_.size() - pos_ > limits_.max_head_bytes) return fail(431, "the trailers are too large");
        return state_ = State::NeedMore;
      }
      head_bytes_ += nl + 1 - pos_;
      if (head_bytes_ > limits_.max_head_bytes) return fail(431, "the trailers are too large");
      take_line(line);
      if (line.empty()) phase_ = Phase::Done;
    }
  }
  return state_ = phase_ == Phase::Done ? State::Complete : State::Failed;
}

RequestParser::State RequestParser::parse_head() {
  for (;;) {
    size_t nl = buffer_.find('\n', pos_);
    if (nl == std::string::npos) {
      if (head_bytes_ + (buffer_.size() - pos_) > limits_.max_head_bytes)
        return fail(request_line_seen_ ? 431 : 414, "the request head is too large");
      return state_ = State::NeedMore;
    }
    head_bytes_ += nl + 1 - pos_;
    if (head_bytes_ > limits_.max_head_bytes)
      return fail(request_line_seen_ ? 431 : 414, "the request head is too large");
    std::string_view line;
    take_line(line);
    if (!request_line_seen_) {
      if (line.empty()) continue;  // empty lines before a request are ignored
      if (!parse_request_line(line)) return state_;
      request_line_seen_ = true;
      continue;
    }
    if (line.empty()) return finish_head();
    if (!parse_header_line(line)) return state_;
  }
}

bool RequestParser::parse_request_line(std::string_view line) {
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    fail(400, "malformed request line");
    return false;
  }
  std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                   version = line.substr(sp2 + 1);
  if (!is_token(method)) {
    fail(400, "malformed method");
    return false;
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    fail(version.rfind("HTTP/", 0) == 0 ? 505 : 400, "unsupported HTTP version");
    return false;
  }
  request_.minor_version = version.back() - '0';
  // Absolute form (http://host/path) is reduced to its path.
  if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0) {
    size_t slash = target.find('/', target.find("//") + 2);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  if (target.empty() || target.front() != '/') {
    fail(400, "malformed request target");
    return false;
  }
  for (unsigned char c : target)
    if (c <= 0x20 || c == 0x7f) {
      fail(400, "malformed request target");
      return false;
    }
  request_.method = std::string(method);
  request_.target = std::string(target);
  size_t q = target.find('?');
  if (!percent_decode(target.substr(0, q), request_.path)) {
    fail(400, "malformed percent escape in the path");
    return false;
  }
  if (q != std::string_view::npos) request_.query = std::string(target.substr(q + 1));
  return true;
}

bool RequestParser::parse_header_line(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t') {
    fail(400, "folded header lines are not accepted");
    return false;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) {
    fail(400, "malformed header line");
    return false;
  }
  std::string_view value = trim(line.substr(colon + 1));
  for (unsigned char c : value)
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      fail(400, "a header value holds a control character");
      return false;
    }
  request_.headers.emplace_back(to_lower(line.substr(0, colon)), std::string(value));
  return true;
}

RequestParser::State RequestParser::finish_head() {
  bool have_length = false;
  for (const auto& [name, value] : request_.headers) {
    if (name == "content-length") {
      size_t n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (value.empty() || ec != std::errc() || end != value.data() + value.size())
        return fail(400, "Content-Length must be a non-negative decimal number");
      if (have_length && n != content_length_) return fail(400, "conflicting Content-Length headers");
      have_length = true;
      content_length_ = n;
    } else if (name == "transfer-encoding") {
      if (to_lower(value) != "chunked") return fail(501, "only the chunked transfer coding is supported");
      if (chunked_) return fail(400, "repeated Transfer-Encoding headers");
      chunked_ = true;
    }
  }
  if (chunked_ && have_length) return fail(400, "Content-Length and Transfer-Encoding together");
  if (chunked_ && request_.minor_version == 0) return fail(400, "chunked bodies need HTTP/1.1");
  if (content_length_ > limits_.max_body_bytes) return fail(413, "the request body is too large");
  if (chunked_) phase_ = Phase::ChunkSize;
  else if (content_length_ > 0) phase_ = Phase::Length;
  else phase_ = Phase::Done;
  if (phase_ != Phase::Done) request_.body.reserve(chunked_ ? 0 : content_length_);
  return state_ = phase_ == Phase::Done ? State::Complete : State::HeadReady;
}

void RequestParser::next() {
  request_ = Request{};
  buffer_.erase(0, pos_);
  pos_ = 0;
  head_bytes_ = 0;
  phase_ = Phase::Head;
  state_ = State::NeedMore;
  started_ = !buffer_.empty();
  request_line_seen_ = false;
  chunked_ = false;
  content_length_ = 0;
  chunk_left_ = 0;
  error_status_ = 0;
  error_message_.clear();
}

}  // namespace fs::http

// Fuzzes the incremental HTTP request parser: any bytes, fed whole and in uneven pieces, must give the same
// request or the same refusal, never a crash, a hang or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/http/request_parser.h"

namespace {

using fs::http::RequestParser;

// Parses every request in `bytes`, fed in pieces of `step`; returns a digest of what came out.
std::string parse_all(std::string_view bytes, size_t step) {
  fs::http::ParserLimits limits;
  limits.max_head_bytes = 4096;
  limits.max_body_bytes = 4096;
  RequestParser p(limits);
  std::string digest;
  auto drain = [&](RequestParser::State s) {
    for (;;) {
      if (s == RequestParser::State::HeadReady) s = p.parse();
      if (s == RequestParser::State::Complete) {
        digest += p.request().method + " " + p.request().path + " " + std::to_string(p.request().body.size()) + ";";
        p.next();
        s = p.parse();
        continue;
      }
      if (s == RequestParser::State::Failed) digest += "E" + std::to_string(p.error_status()) + ";";
      return s;
    }
  };
  for (size_t i = 0; i < bytes.size(); i += step)
    if (drain(p.feed(bytes.substr(i, step))) == RequestParser::State::Failed) break;
  return digest;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (parse_all(bytes, size ? size : 1) != parse_all(bytes, 1 + size % 7)) std::abort();
  return 0;
}

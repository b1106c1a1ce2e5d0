// The incremental HTTP parser: requests split at every byte, pipelined requests, chunked bodies, and every
// malformed or oversized head and body refused with its status as the bytes arrive.
#include <gtest/gtest.h>

#include "server/http/request_parser.h"

namespace fs::http {
namespace {

using State = RequestParser::State;

ParserLimits small_limits() {
  ParserLimits l;
  l.max_head_bytes = 1024;
  l.max_body_bytes = 64;
  return l;
}

// Feeds `bytes` one at a time; returns the final state.
State feed_bytewise(RequestParser& p, std::string_view bytes) {
  State s = State::NeedMore;
  for (char c : bytes) {
    s = p.feed(std::string_view(&c, 1));
    if (s == State::HeadReady) s = p.parse();
    if (s == State::Failed || s == State::Complete) break;
  }
  return s;
}

State feed_whole(RequestParser& p, std::string_view bytes) {
  State s = p.feed(bytes);
  if (s == State::HeadReady) s = p.parse();
  return s;
}

TEST(RequestParser, ParsesAHeadAndBodyFedByteByByte) {
  RequestParser p(small_limits());
  std::string req = "POST /v1/models/Org%2FName?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nX-Key:  v  \r\n\r\nhello";
  ASSERT_EQ(feed_bytewise(p, req), State::Complete);
  EXPECT_EQ(p.request().method, "POST");
  EXPECT_EQ(p.request().path, "/v1/models/Org/Name");
  EXPECT_EQ(p.request().query, "x=1");
  EXPECT_EQ(p.request().header("x-key"), "v");
  EXPECT_EQ(p.request().header("HOST"), "a");
  EXPECT_EQ(p.request().body, "hello");
  EXPECT_TRUE(p.request().wants_keep_alive());
}

TEST(RequestParser, PipelinedRequestsComeOutInOrder) {
  RequestParser p(small_limits());
  std::string two = "GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nokGET /c HTTP/1.0\r\n\r\n";
  ASSERT_EQ(feed_whole(p, two), State::Complete);
  EXPECT_EQ(p.request().path, "/a");
  p.next();
  ASSERT_EQ(p.parse(), State::HeadReady);
  ASSERT_EQ(p.parse(), State::Complete);
  EXPECT_EQ(p.request().body, "ok");
  p.next();
  ASSERT_EQ(p.parse(), State::Complete);
  EXPECT_EQ(p.request().path, "/c");
  EXPECT_FALSE(p.request().wants_keep_alive());
  p.next();
  EXPECT_EQ(p.parse(), State::NeedMore);
  EXPECT_FALSE(p.started());
}

TEST(RequestParser, DecodesChunkedBodiesWithExtensionsAndTrailers) {
  RequestParser p(small_limits());
  std::string req =
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nT: x\r\n\r\n";
  ASSERT_EQ(feed_bytewise(p, req), State::Complete);
  EXPECT_EQ(p.request().body, "hello world");
}

TEST(RequestParser, ChunkedBodiesCountTowardTheLimitAsTheyArrive) {
  RequestParser p(small_limits());
  std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  std::string chunk = "20\r\n" + std::string(32, 'a') + "\r\n";
  EXPECT_EQ(feed_whole(p, head + chunk + chunk), State::NeedMore);
  EXPECT_EQ(feed_whole(p, "1\r\n"), State::Failed);
  EXPECT_EQ(p.error_status(), 413);
}

TEST(RequestParser, RefusesBadFraming) {
  struct Case {
    std::string bytes;
    int status;
  };
  const Case cases[] = {
      {"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 5x\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n", 413},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET /a b HTTP/1.1\r\n\r\n", 400},
      {"GET nopath HTTP/1.1\r\n\r\n", 400},
      {"GET /%zz HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\n" + std::string(2000, 'h') + ": x\r\n\r\n", 431},
      {"GET /" + std::string(2000, 'p') + " HTTP/1.1\r\n\r\n", 414},
  };
  for (const Case& c : cases) {
    RequestParser whole(small_limits()), bytewise(small_limits());
    EXPECT_EQ(feed_whole(whole, c.bytes), State::Failed) << c.bytes.substr(0, 80);
    EXPECT_EQ(whole.error_status(), c.status) << c.bytes.substr(0, 80);
    EXPECT_EQ(feed_bytewise(bytewise, c.bytes), State::Failed) << c.bytes.substr(0, 80);
    EXPECT_EQ(bytewise.error_status(), c.status) << c.bytes.substr(0, 80);
  }
}

TEST(RequestParser, HeadSizeIsBoundedBeforeTheLineEnds) {
  RequestParser p(small_limits());
  EXPECT_EQ(feed_whole(p, "GET / HTTP/1.1\r\nX: " + std::string(4000, 'v')), State::Failed);
  EXPECT_EQ(p.error_status(), 431);
}

TEST(RequestParser, LeadingBlankLinesAndBareLineFeedsAreAccepted) {
  RequestParser p(small_limits());
  ASSERT_EQ(feed_whole(p, "\r\n\r\nGET /x HTTP/1.1\nHost: h\n\n"), State::Complete);
  EXPECT_EQ(p.request().path, "/x");
  EXPECT_EQ(p.request().header("host"), "h");
}

}  // namespace
}  // namespace fs::http

// StopMatcher: stop strings across pieces, held-back prefixes, and streaming with a real tokenizer.
#include <gtest/gtest.h>

#include "support/fixtures.h"
#include "text/stop_matcher.h"
#include "text/tokenizer_test_util.h"

namespace fs {
namespace {

TEST(StopMatcher, FindsStopSpanningPieces) {
  StopMatcher m({"</s>", "STOP"});
  auto a = m.push("Hello <");
  EXPECT_EQ(a.text, "Hello ");  // "<" could start "</s>"
  EXPECT_FALSE(a.stopped);
  auto b = m.push("/");
  EXPECT_EQ(b.text, "");
  auto c = m.push("s> tail");
  EXPECT_TRUE(c.stopped);
  EXPECT_EQ(c.stop, "</s>");
  EXPECT_EQ(c.text, "");
  EXPECT_TRUE(m.push("more").text.empty());
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, ReleasesFalseStarts) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("aST").text, "a");
  EXPECT_EQ(m.push("OX").text, "STOX");
  EXPECT_EQ(m.push("ST").text, "");
  EXPECT_EQ(m.flush(), "ST");
}

TEST(StopMatcher, EarliestStopWins) {
  StopMatcher m({"cd", "b"});
  auto s = m.push("abcd");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.stop, "b");
  EXPECT_EQ(s.text, "a");
}

TEST(StopMatcher, NoStopsPassesEverything) {
  StopMatcher m({""});
  EXPECT_EQ(m.push("abc").text, "abc");
  EXPECT_EQ(m.flush(), "");
}

// A stop string that begins inside one token and ends inside the next one is found while streaming, and the
// text before it is what full decoding gives up to the stop.
TEST(StopMatcher, StreamsRealTokensAcrossBoundaries) {
  FS_REQUIRE_SHARED(shared);
  const Tokenizer& tok = test::cached_tokenizer(shared / "models" / "tiny-qwen3");
  json ref = read_json_file(shared / "reference" / "tokenizers" / "qwen3.json");
  int checked = 0;
  for (const auto& c : ref.at("strings")) {
    auto ids = c.at("ids").get<std::vector<int32_t>>();
    std::string full = tok.decode(ids);
    if (ids.size() < 4 || !text::is_valid_utf8(full)) continue;
    // Last two bytes of token 1's text plus the first two of token 2's, when both are plain ASCII.
    std::string t1 = tok.decode({ids[1]}), t2 = tok.decode({ids[2]});
    if (t1.size() < 2 || t2.size() < 2) continue;
    std::string stop = t1.substr(t1.size() - 2) + t2.substr(0, 2);
    if (!text::is_valid_utf8(stop)) continue;
    IncrementalDecoder dec(tok, false);
    StopMatcher m({stop});
    std::string emitted;
    bool stopped = false;
    for (int32_t id : ids) {
      auto step = m.push(dec.push(id));
      emitted += step.text;
      if (step.stopped) {
        stopped = true;
        break;
      }
    }
    SCOPED_TRACE("text: " + full + " stop: " + stop);
    EXPECT_TRUE(stopped);
    EXPECT_EQ(emitted, full.substr(0, full.find(stop)));
    ++checked;
  }
  EXPECT_GT(checked, 3);
}

}  // namespace
}  // namespace fs

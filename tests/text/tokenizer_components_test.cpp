// Tokenizer parts on small tokenizer.json files: split behaviors, SentencePiece-style BPE with byte fallback and
// fused unknowns, Metaspace, added-token flags, malformed files, invalid UTF-8 input.
#include <gtest/gtest.h>

#include "core/error.h"
#include "support/fixtures.h"
#include "text/pre_tokenizer.h"
#include "text/tokenizer_test_util.h"

namespace fs {
namespace {

using text::Span;
using text::SplitBehavior;

std::vector<std::string> split_text(const std::string& s, SplitBehavior behavior, bool invert = false) {
  std::vector<Span> matches;
  for (size_t at = s.find('-'); at != std::string::npos; at = s.find('-', at + 1)) matches.emplace_back(at, at + 1);
  std::vector<std::string> out;
  for (auto [a, b] : text::split_by_matches(s.size(), matches, behavior, invert)) out.push_back(s.substr(a, b - a));
  return out;
}

// The example of the tokenizers documentation for SplitDelimiterBehavior.
TEST(SplitBehavior, DocumentedExample) {
  using V = std::vector<std::string>;
  const std::string s = "the-final--countdown";
  EXPECT_EQ(split_text(s, SplitBehavior::Removed), (V{"the", "final", "countdown"}));
  EXPECT_EQ(split_text(s, SplitBehavior::Isolated), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split_text(s, SplitBehavior::MergedWithPrevious), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split_text(s, SplitBehavior::MergedWithNext), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split_text(s, SplitBehavior::Contiguous), (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(split_text(s, SplitBehavior::Removed, true), (V{"-", "-", "-"}));
}

// A SentencePiece-style BPE: "▁" for spaces, byte fallback, fused unknowns, merges in both JSON forms.
const char* kSentencePiece = R"({
  "added_tokens": [{"id": 0, "content": "<unk>", "special": true, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false}],
  "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                 {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null,
  "post_processor": null,
  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
              {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
            "vocab": {"<unk>": 0, "▁": 1, "a": 2, "b": 3, "▁a": 4, "ab": 5, "▁ab": 6, "<0x43>": 7, "<0xC3>": 8,
                      "<0xA9>": 9},
            "merges": ["▁ a", ["a", "b"], "▁a b"]}
})";

TEST(SentencePieceStyle, ByteFallbackAndUnknowns) {
  auto tok = test::load_tokenizer_json("sp", kSentencePiece);
  // "▁ab▁Cé": merges by rank, 'C' and 'é' through their byte tokens.
  EXPECT_EQ(tok->encode("ab Cé", false), (std::vector<int32_t>{6, 1, 7, 8, 9}));
  EXPECT_EQ(tok->decode({6, 1, 7, 8, 9}), "ab Cé");
  EXPECT_EQ(test::stream_decode(*tok, {6, 1, 7, 8, 9}, false), "ab Cé");
  // Characters without a token or byte tokens fuse into one unknown.
  EXPECT_EQ(tok->encode("ab ☃☃", false), (std::vector<int32_t>{6, 1, 0}));
  // A lone continuation byte decodes to U+FFFD.
  EXPECT_EQ(tok->decode({2, 9}), "a\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode({0}, true), "");
}

TEST(SentencePieceStyle, MetaspacePreTokenizerAndDecoder) {
  json spec = json::parse(kSentencePiece);
  spec["normalizer"] = nullptr;
  spec["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}};
  spec["decoder"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}};
  auto tok = test::load_tokenizer_json("metaspace", spec.dump());
  EXPECT_EQ(tok->encode("ab ab", false), (std::vector<int32_t>{6, 6}));
  EXPECT_EQ(tok->decode({6, 6}), "ab ab");
}

// Added-token flags on the fortune-demo tokenizer: the expected ids come from encoding the surrounding text alone.
class AddedTokenFlags : public ::testing::Test {
 protected:
  void SetUp() override {
    FS_REQUIRE_SHARED(shared);
    shared_ = shared;
  }
  std::unique_ptr<Tokenizer> with_token(json flags) {
    json spec = json::parse(read_file(shared_ / "models" / "fortune-demo" / "tokenizer.json"));
    flags["id"] = 8192;
    flags["content"] = "<X>";
    for (const char* key : {"special", "single_word", "lstrip", "rstrip", "normalized"})
      if (!flags.contains(key)) flags[key] = false;
    spec["added_tokens"].push_back(flags);
    return test::load_tokenizer_json("added", spec.dump());
  }
  static std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  std::filesystem::path shared_;
};

TEST_F(AddedTokenFlags, PlainSplitsAnywhere) {
  auto tok = with_token({});
  EXPECT_EQ(tok->encode("hello<X>world", false), cat(cat(tok->encode("hello", false), {8192}), tok->encode("world", false)));
  EXPECT_EQ(tok->token_to_id("<X>"), 8192);
  EXPECT_EQ(tok->vocab_size(), 8193);
  EXPECT_FALSE(tok->is_special(8192));
}

TEST_F(AddedTokenFlags, LstripAndRstripTakeWhitespace) {
  auto l = with_token({{"lstrip", true}});
  EXPECT_EQ(l->encode("hello  <X> world", false), cat(cat(l->encode("hello", false), {8192}), l->encode(" world", false)));
  auto r = with_token({{"rstrip", true}});
  EXPECT_EQ(r->encode("hello  <X> world", false), cat(cat(r->encode("hello  ", false), {8192}), r->encode("world", false)));
}

TEST_F(AddedTokenFlags, SingleWordNeedsWordBoundaries) {
  auto tok = with_token({{"single_word", true}});
  auto inside = tok->encode("a<X>b", false);
  EXPECT_EQ(std::count(inside.begin(), inside.end(), 8192), 0);
  EXPECT_EQ(tok->encode("a <X> b", false), cat(cat(tok->encode("a ", false), {8192}), tok->encode(" b", false)));
}

TEST_F(AddedTokenFlags, SpecialTokensCanBeSkippedWhenDecoding) {
  auto tok = with_token({{"special", true}});
  auto ids = tok->encode("hi<X>", false);
  ASSERT_EQ(ids.back(), 8192);
  EXPECT_TRUE(tok->is_special(8192));
  EXPECT_EQ(tok->decode(ids, false), "hi<X>");
  EXPECT_EQ(tok->decode(ids, true), "hi");
  EXPECT_EQ(test::stream_decode(*tok, ids, true), "hi");
}

TEST(MalformedTokenizer, ThrowsFsError) {
  std::vector<std::string> bad = {
      "",
      "{",
      "[1, 2]",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a"]}})",
      R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})",
      R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": {"type": "Nope"}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
          "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "added_tokens": [{"id": 1}]})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "unk_token": "<unk>"}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b\u00": 1}, "merges": []}})",
  };
  for (size_t k = 0; k < bad.size(); ++k) {
    SCOPED_TRACE(bad[k]);
    EXPECT_THROW(test::load_tokenizer_json("bad" + std::to_string(k), bad[k]), Error);
  }
  EXPECT_THROW(Tokenizer::load(std::filesystem::temp_directory_path() / "foldserve_no_such_dir"), Error);
}

TEST(MalformedTokenizer, TruncatedRealFile) {
  FS_REQUIRE_SHARED(shared);
  std::string full = read_file(shared / "models" / "fortune-demo" / "tokenizer.json");
  for (size_t cut : {full.size() / 3, full.size() / 2, full.size() - 2}) {
    EXPECT_THROW(test::load_tokenizer_json("cut", full.substr(0, cut)), Error);
  }
}

// Invalid UTF-8 is encoded as if each bad sequence were U+FFFD, as Python would have to receive it.
TEST(InvalidUtf8, ReplacedNotCrashing) {
  FS_REQUIRE_SHARED(shared);
  for (const char* dir : {"models/tiny-qwen3", "tokenizers/gemma3"}) {
    const Tokenizer& tok = test::cached_tokenizer(shared / dir);
    std::string bad = "ok \xFF\xFE mid \xE4\xBD end \xC3";
    EXPECT_EQ(tok.encode(bad, false), tok.encode(text::repair_utf8(bad), false));
    EXPECT_EQ(text::repair_utf8(bad), "ok \xEF\xBF\xBD\xEF\xBF\xBD mid \xEF\xBF\xBD end \xEF\xBF\xBD");
    auto ids = tok.encode(bad, true);
    EXPECT_EQ(tok.decode(ids, true), text::repair_utf8(bad));
  }
}

}  // namespace
}  // namespace fs

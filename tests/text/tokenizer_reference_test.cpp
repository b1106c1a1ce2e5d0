// Encodes and decodes the reference strings of ../shared exactly as the transformers tokenizers do.
#include <gtest/gtest.h>

#include "core/files.h"
#include "support/fixtures.h"
#include "text/tokenizer_test_util.h"
#include "text/utf8.h"

namespace fs {
namespace {

struct TokenizerFixture {
  const char* reference;  // reference/tokenizers/<name>.json
  const char* dir;        // folder holding tokenizer.json, relative to shared/
};

class ReferenceStrings : public ::testing::TestWithParam<TokenizerFixture> {};

TEST_P(ReferenceStrings, EncodeDecodeAndStream) {
  FS_REQUIRE_SHARED(shared);
  const auto& fx = GetParam();
  const Tokenizer& tok = test::cached_tokenizer(shared / fx.dir);
  json ref = read_json_file(shared / "reference" / "tokenizers" / (std::string(fx.reference) + ".json"));
  ASSERT_FALSE(ref.at("strings").empty());
  for (const auto& c : ref.at("strings")) {
    std::string text = c.at("text").get<std::string>();
    auto ids = c.at("ids").get<std::vector<int32_t>>();
    SCOPED_TRACE("text: " + text);
    EXPECT_EQ(tok.encode(text, false), ids);
    EXPECT_EQ(tok.encode(text, true), c.at("ids_with_special").get<std::vector<int32_t>>());
    std::string decoded = c.at("decoded").get<std::string>();
    EXPECT_EQ(tok.decode(ids), decoded);
    EXPECT_EQ(test::stream_decode(tok, ids, false), decoded);
    auto with_special = c.at("ids_with_special").get<std::vector<int32_t>>();
    EXPECT_EQ(test::stream_decode(tok, with_special, true), tok.decode(with_special, true));
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, ReferenceStrings,
                         ::testing::Values(TokenizerFixture{"qwen3", "models/tiny-qwen3"},
                                           TokenizerFixture{"llama3_1", "models/tiny-llama3"},
                                           TokenizerFixture{"gemma3", "tokenizers/gemma3"}),
                         [](const auto& info) { return std::string(info.param.reference); });

class ModelCases : public ::testing::TestWithParam<const char*> {};

// Prompt ids of every case in reference/<model>/cases.json (chat prompts carry their special tokens in the text).
TEST_P(ModelCases, PromptIds) {
  FS_REQUIRE_SHARED(shared);
  std::string model = GetParam();
  const Tokenizer& tok = test::cached_tokenizer(shared / "models" / model);
  json ref = read_json_file(shared / "reference" / model / "cases.json");
  ASSERT_FALSE(ref.at("cases").empty());
  for (const auto& c : ref.at("cases")) {
    std::string text = c.at("text").get<std::string>();
    bool add_special = c.contains("add_special_tokens") && c.at("add_special_tokens").get<bool>();
    auto ids = c.at("ids").get<std::vector<int32_t>>();
    SCOPED_TRACE(model + ": " + text.substr(0, 80));
    EXPECT_EQ(tok.encode(text, add_special), ids);
    EXPECT_EQ(test::stream_decode(tok, ids, false), tok.decode(ids));
    EXPECT_EQ(test::stream_decode(tok, ids, true), tok.decode(ids, true));
    if (!add_special) {
      EXPECT_EQ(tok.decode(ids), text);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelCases,
                         ::testing::Values("fortune-demo", "tiny-qwen3", "tiny-llama3", "tiny-qwen2"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (auto& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

// The fortune-demo replies (greedy ids up to the end-of-turn token) decode exactly, streamed or whole.
TEST(FortuneDemo, RepliesDecode) {
  FS_REQUIRE_SHARED(shared);
  const Tokenizer& tok = test::cached_tokenizer(shared / "models" / "fortune-demo");
  json ref = read_json_file(shared / "reference" / "fortune-demo" / "cases.json");
  for (const auto& c : ref.at("cases")) {
    if (!c.contains("reply") || !c.contains("greedy")) continue;
    std::vector<int32_t> ids;
    auto eos = tok.token_to_id(tok.eos_token());
    ASSERT_TRUE(eos.has_value());
    for (const auto& step : c.at("greedy")) {
      int32_t id = step.at("id").get<int32_t>();
      if (id == *eos) break;
      ids.push_back(id);
    }
    std::string full = tok.decode(ids, true);
    EXPECT_EQ(test::stream_decode(tok, ids, true), full);
    EXPECT_EQ(full, c.at("reply").get<std::string>());
  }
}

}  // namespace
}  // namespace fs

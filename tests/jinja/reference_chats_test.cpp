// Every conversation in the transformers reference fixtures renders to the same text with our engine.
#include <gtest/gtest.h>

#include "jinja/jinja_test_support.h"
#include "support/fixtures.h"
#include "text/chat_template.h"

namespace fs::test {
namespace {

ChatTemplate load_template(const std::filesystem::path& dir) {
  auto t = ChatTemplate::load(dir);
  if (!t) throw Error("no chat template in " + dir.string());
  return std::move(*t);
}

struct TokenizerChats : ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(TokenizerChats, RendersEveryConversation) {
  FS_REQUIRE_SHARED(shared);
  auto [name, folder] = GetParam();
  ChatTemplate tmpl = load_template(shared / folder);
  ojson ref = read_ordered_json(shared / "reference/tokenizers" / (std::string(name) + ".json"));
  ASSERT_TRUE(ref.contains("chat"));
  ASSERT_FALSE(ref["chat"].empty());
  for (const auto& c : ref["chat"]) {
    ojson tools = c.contains("tools") ? c["tools"] : ojson();
    ojson kwargs = c.value("kwargs", ojson::object());
    std::string got = tmpl.render(c["messages"], tools, c["add_generation_prompt"].get<bool>(), kwargs);
    EXPECT_EQ(got, c["text"].get<std::string>())
        << name << " / " << c["name"] << " add_generation_prompt=" << c["add_generation_prompt"]
        << " kwargs=" << kwargs.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, TokenizerChats,
                         ::testing::Values(std::make_pair("qwen3", "models/tiny-qwen3"),
                                           std::make_pair("llama3_1", "models/tiny-llama3"),
                                           std::make_pair("gemma3", "tokenizers/gemma3")));

// The model references were rendered with add_generation_prompt=True and enable_thinking=False (visible in
// their Qwen texts, which end in an empty think block); the other templates ignore enable_thinking.
const ojson kModelKwargs = {{"enable_thinking", false}};

TEST(ModelChats, TextCasesMatch) {
  FS_REQUIRE_SHARED(shared);
  int checked = 0;
  for (const char* model : {"tiny-qwen3", "tiny-llama3", "tiny-qwen2"}) {
    ChatTemplate tmpl = load_template(shared / "models" / model);
    ojson ref = read_ordered_json(shared / "reference" / model / "cases.json");
    for (const auto& c : ref["cases"]) {
      if (!c.contains("messages") || c["messages"].is_null()) continue;
      EXPECT_EQ(tmpl.render(c["messages"], ojson(), true, kModelKwargs), c["text"].get<std::string>())
          << model << " / " << c["name"];
      ++checked;
    }
  }
  EXPECT_GE(checked, 9);
}

TEST(ModelChats, FortuneDemoAsks) {
  FS_REQUIRE_SHARED(shared);
  ChatTemplate tmpl = load_template(shared / "models/fortune-demo");
  ojson ref = read_ordered_json(shared / "reference/fortune-demo/cases.json");
  ASSERT_FALSE(ref["cases"].empty());
  for (const auto& c : ref["cases"]) {
    ojson messages = ojson::array({{{"role", "user"}, {"content", c["ask"]}}});
    EXPECT_EQ(tmpl.render(messages, ojson(), true, kModelKwargs), c["text"].get<std::string>()) << c["ask"];
  }
}

TEST(ModelChats, VisionPrompts) {
  FS_REQUIRE_SHARED(shared);
  ChatTemplate tmpl = load_template(shared / "models/tiny-qwen2.5-vl");
  ojson ref = read_ordered_json(shared / "reference/tiny-qwen2.5-vl/cases.json");
  ASSERT_FALSE(ref["prompts"].empty());
  for (const auto& p : ref["prompts"])
    EXPECT_EQ(tmpl.render(p["messages"], ojson(), true, kModelKwargs), p["text"].get<std::string>()) << p["name"];
}

}  // namespace
}  // namespace fs::test

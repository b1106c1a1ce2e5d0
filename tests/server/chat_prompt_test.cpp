// The chat request path up to the prompt text: key order of `tools` kept into the template's tojson (Qwen3's
// reference renders), image parts collected and normalized, placeholder injection refused, image cache keys.
#include <gtest/gtest.h>

#include "core/files.h"
#include "server/api_request.h"
#include "server/image_input.h"
#include "support/fixtures.h"
#include "text/chat_template.h"

namespace fs::server {
namespace {

using ojson = nlohmann::ordered_json;

ParseLimits image_limits() {
  ParseLimits l;
  l.image_refusal = "";
  l.max_images = 3;
  l.reserved_text = {"<|image_pad|>", "<|vision_start|>"};
  return l;
}

ChatRequest parse_ok(const std::string& body, const ParseLimits& limits) {
  auto r = parse_chat_request(body, limits);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << " → " << e->message;
  return std::holds_alternative<ChatRequest>(r) ? std::get<ChatRequest>(r) : ChatRequest{};
}

ApiError parse_error(const std::string& body, const ParseLimits& limits) {
  auto r = parse_chat_request(body, limits);
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

// Every Qwen3 reference conversation with tools, sent as a request body in the reference's key order, renders to
// the reference text; the same tools with sorted keys would not.
TEST(ChatPrompt, ToolsKeepTheirKeyOrderIntoTheTemplate) {
  FS_REQUIRE_SHARED(shared);
  auto tmpl = ChatTemplate::load(shared / "models" / "tiny-qwen3");
  ASSERT_TRUE(tmpl.has_value());
  std::string text = read_file(shared / "reference" / "tokenizers" / "qwen3.json");
  ojson ref = ojson::parse(text);
  int checked = 0;
  for (const auto& c : ref["chat"]) {
    if (!c.contains("tools") || !c["add_generation_prompt"].get<bool>()) continue;
    SCOPED_TRACE(c["name"].get<std::string>());
    ojson body = {{"messages", c["messages"]}, {"tools", c["tools"]}, {"chat_template_kwargs", c["kwargs"]}};
    ChatRequest r = parse_ok(body.dump(), ParseLimits{});
    std::string rendered = tmpl->render(r.messages, r.tools, true, r.template_kwargs);
    EXPECT_EQ(rendered, c["text"].get<std::string>());
    // Sorted keys ("function" before "type") give another text, so this test sees a lost order.
    nlohmann::json sorted_tools = nlohmann::json::parse(r.tools.dump());
    EXPECT_NE(tmpl->render(nlohmann::json::parse(r.messages.dump()), sorted_tools, true,
                           nlohmann::json::parse(r.template_kwargs.dump())),
              rendered);
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

TEST(ChatPrompt, ImagePartsAreCollectedInOrderAndNormalized) {
  auto r = parse_ok(R"({"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[
      {"type":"text","text":"Compare "},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}},
      {"type":"text","text":" and "},{"type":"image","image":"https://example.com/b.jpg"},
      {"type":"input_image","image_url":"https://example.com/c.webp"}]}]})",
                    image_limits());
  ASSERT_EQ(r.images.size(), 3u);
  EXPECT_EQ(r.images[0].url, "data:image/png;base64,AAAA");
  EXPECT_EQ(r.images[0].param, "messages[1].content[1]");
  EXPECT_EQ(r.images[1].url, "https://example.com/b.jpg");
  EXPECT_EQ(r.images[2].url, "https://example.com/c.webp");
  ojson want = ojson::parse(R"([{"type":"text","text":"Compare "},{"type":"image"},{"type":"text","text":" and "},
                                {"type":"image"},{"type":"image"}])");
  EXPECT_EQ(r.messages[1]["content"], want);
  EXPECT_EQ(r.messages[0]["content"], "be brief");
  // Without images, text parts still join into one string.
  auto t = parse_ok(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})",
                    image_limits());
  EXPECT_EQ(t.messages[0]["content"], "ab");
  EXPECT_TRUE(t.images.empty());
}

TEST(ChatPrompt, ImagePartsRefusedWithTheReason) {
  const std::string one_image = R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:,x"}}]}]})";
  ParseLimits off;  // the default: image input off
  ApiError e = parse_error(one_image, off);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages[0].content[0]");
  EXPECT_NE(e.message.find("--vision"), std::string::npos) << e.message;
  ParseLimits text_only = image_limits();
  text_only.image_refusal = "the model 'fortune-demo' has no vision tower";
  EXPECT_EQ(parse_error(one_image, text_only).message, text_only.image_refusal);

  auto limits = image_limits();
  EXPECT_EQ(parse_error(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})", limits).param,
            "messages[0].content[0].image_url");
  EXPECT_EQ(parse_error(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":7}}]}]})", limits)
                .param,
            "messages[0].content[0].image_url");
  EXPECT_EQ(parse_error(R"({"messages":[{"role":"assistant","content":[{"type":"image","image":"data:,x"}]}]})", limits)
                .param,
            "messages[0].content[0]");
  std::string four = R"({"messages":[{"role":"user","content":[)";
  for (int i = 0; i < 4; ++i) four += std::string(i ? "," : "") + R"({"type":"image","image":"data:,x"})";
  four += "]}]}";
  EXPECT_EQ(parse_error(four, limits).param, "messages[0].content[3]");
}

TEST(ChatPrompt, PlaceholderTokensInTextAreRefused) {
  auto limits = image_limits();
  ApiError e = parse_error(R"({"messages":[{"role":"user","content":"look: <|image_pad|>"}]})", limits);
  EXPECT_EQ(e.param, "messages[0].content");
  EXPECT_NE(e.message.find("<|image_pad|>"), std::string::npos);
  EXPECT_EQ(parse_error(R"({"messages":[{"role":"system","content":[{"type":"text","text":"<|vision_start|>"}]}]})",
                        limits)
                .param,
            "messages[0].content[0].text");
  // Models without vision tokens reserve nothing.
  parse_ok(R"({"messages":[{"role":"user","content":"look: <|image_pad|>"}]})", ParseLimits{});
}

TEST(ChatPrompt, ImagePadCacheKeysTieEveryPadToItsImage) {
  vision::ImageDigest a{}, b{};
  b[31] = 1;
  EXPECT_NE(image_pad_cache_key(a, 0) >> 63, 0u);
  EXPECT_EQ(image_pad_cache_key(a, 5), image_pad_cache_key(a, 5));
  EXPECT_NE(image_pad_cache_key(a, 0), image_pad_cache_key(a, 1));
  EXPECT_NE(image_pad_cache_key(a, 0), image_pad_cache_key(b, 0));
}

}  // namespace
}  // namespace fs::server

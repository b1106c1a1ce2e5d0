// Reasoning and tool calls split out of a reply, the same whether the text arrives whole or a byte at a time.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/reply_splitter.h"

namespace fs::server {
namespace {

struct Split {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

Split run(const std::string& text, bool in_reasoning, bool tools, size_t piece) {
  ReplySplitter s(in_reasoning, tools);
  Split out;
  for (size_t i = 0; i < text.size(); i += piece) {
    ReplyDelta d = s.push(std::string_view(text).substr(i, piece));
    out.reasoning += d.reasoning;
    out.content += d.content;
  }
  ReplyDelta d = s.finish();
  out.reasoning += d.reasoning;
  out.content += d.content;
  out.calls = s.tool_calls();
  return out;
}

// Every piece size gives the same split as the whole text.
Split split_all_ways(const std::string& text, bool in_reasoning, bool tools) {
  Split whole = run(text, in_reasoning, tools, text.size() + 1);
  for (size_t piece = 1; piece <= 13; ++piece) {
    Split s = run(text, in_reasoning, tools, piece);
    EXPECT_EQ(s.reasoning, whole.reasoning) << "piece " << piece;
    EXPECT_EQ(s.content, whole.content) << "piece " << piece;
    EXPECT_EQ(s.calls.size(), whole.calls.size()) << "piece " << piece;
  }
  return whole;
}

TEST(ReplySplitter, PlainTextPassesThrough) {
  Split s = split_all_ways("A <b>bold</b> claim < 3 and <thin ice.", false, true);
  EXPECT_EQ(s.content, "A <b>bold</b> claim < 3 and <thin ice.");
  EXPECT_TRUE(s.reasoning.empty());
}

TEST(ReplySplitter, ThinkBlockBecomesReasoning) {
  Split s = split_all_ways("<think>\nThe user wants a fact.\n</think>\n\nComputers add numbers.", false, false);
  EXPECT_EQ(s.reasoning, "The user wants a fact.\n");
  EXPECT_EQ(s.content, "Computers add numbers.");
}

TEST(ReplySplitter, PromptEndingInsideThink) {
  Split s = split_all_ways("Let me think.</think>Answer.", true, false);
  EXPECT_EQ(s.reasoning, "Let me think.");
  EXPECT_EQ(s.content, "Answer.");
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
}

TEST(ReplySplitter, ThinkAfterContentStaysContent) {
  Split s = split_all_ways("Hello <think>not reasoning</think>", false, false);
  EXPECT_EQ(s.content, "Hello <think>not reasoning</think>");
}

TEST(ReplySplitter, ParsesQwenToolCalls) {
  Split s = split_all_ways(
      "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"now\", \"arguments\": \"{}\"}\n</tool_call>",
      false, true);
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(s.calls[0].arguments), nlohmann::json({{"city", "Paris"}}));
  EXPECT_EQ(s.calls[1].name, "now");
  EXPECT_EQ(s.calls[1].arguments, "{}");
  EXPECT_EQ(s.content, "Checking.\n");
}

TEST(ReplySplitter, ToolTagsAreTextWithoutTools) {
  std::string text = "<tool_call>{\"name\": \"x\"}</tool_call>";
  Split s = split_all_ways(text, false, false);
  EXPECT_EQ(s.content, text);
  EXPECT_TRUE(s.calls.empty());
}

TEST(ReplySplitter, MalformedOrUnterminatedToolCallBecomesContent) {
  Split bad = split_all_ways("<tool_call>{not json}</tool_call>", false, true);
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "<tool_call>{not json}</tool_call>");
  Split cut = split_all_ways("<tool_call>{\"name\": \"f\", \"argum", false, true);
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_NE(cut.content.find("argum"), std::string::npos);
  Split done_at_end = split_all_ways("<tool_call>{\"name\": \"f\", \"arguments\": {}}", false, true);
  ASSERT_EQ(done_at_end.calls.size(), 1u);
}

}  // namespace
}  // namespace fs::server

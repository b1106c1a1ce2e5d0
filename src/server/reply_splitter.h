#pragma once
// Splits a chat reply, as it streams, into reasoning (<think>…</think>), content, and Qwen-style tool calls
// (<tool_call>{"name": …, "arguments": …}</tool_call>). Text that could still become a tag is held back.
#include <string>
#include <string_view>
#include <vector>

namespace fs::server {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON text, as OpenAI sends it
};

struct ReplyDelta {
  std::string reasoning;
  std::string content;
  size_t first_new_tool_call = 0;  // tool_calls()[first_new_tool_call..] completed in this step
  bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReplySplitter {
 public:
  // start_in_reasoning: the prompt ended inside <think>; parse_tools: the request offered tools.
  ReplySplitter(bool start_in_reasoning, bool parse_tools);

  ReplyDelta push(std::string_view text);
  // Ends the reply: releases held-back text; an unterminated or malformed tool call becomes content.
  ReplyDelta finish();
  const std::vector<ToolCall>& tool_calls() const { return tool_calls_; }

 private:
  enum class Mode { Content, Reasoning, Tool };
  void drain(ReplyDelta& out, bool final);
  void emit(ReplyDelta& out, std::string_view text);
  void close_tool(ReplyDelta& out);

  Mode mode_;
  bool parse_tools_;
  bool content_started_ = false;  // non-space content seen; <think> only opens before that
  bool strip_leading_space_ = false;
  std::string pending_;
  std::string tool_text_;
  std::vector<ToolCall> tool_calls_;
};

// Whether a rendered prompt leaves the model inside a <think> block.
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace fs::server

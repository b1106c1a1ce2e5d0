#include "server/reply_splitter.h"

#include "server/json_shape.h"

#include <nlohmann/json.hpp>

namespace fs::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kToolOpen = "<tool_call>";
constexpr std::string_view kToolClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

ReplySplitter::ReplySplitter(bool start_in_reasoning, bool parse_tools)
    : mode_(start_in_reasoning ? Mode::Reasoning : Mode::Content), parse_tools_(parse_tools) {}

ReplyDelta ReplySplitter::push(std::string_view text) {
  ReplyDelta out;
  out.first_new_tool_call = tool_calls_.size();
  pending_.append(text);
  drain(out, false);
  return out;
}

ReplyDelta ReplySplitter::finish() {
  ReplyDelta out;
  out.first_new_tool_call = tool_calls_.size();
  drain(out, true);
  if (mode_ == Mode::Tool) {
    tool_text_ += pending_;
    pending_.clear();
    close_tool(out);
  } else {
    emit(out, pending_);
    pending_.clear();
  }
  return out;
}

void ReplySplitter::emit(ReplyDelta& out, std::string_view text) {
  if (mode_ == Mode::Tool) {
    tool_text_.append(text);
    return;
  }
  if (strip_leading_space_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    strip_leading_space_ = false;
  }
  if (mode_ == Mode::Reasoning) {
    out.reasoning.append(text);
  } else {
    for (char c : text)
      if (!is_space(c)) content_started_ = true;
    out.content.append(text);
  }
}

void ReplySplitter::close_tool(ReplyDelta& out) {
  mode_ = Mode::Content;
  std::string_view body = trim(tool_text_);
  // A call nested beyond the body limits stays text.
  auto j = json_shape_violation(body) ? nlohmann::json() : nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
  const nlohmann::json* args = nullptr;
  if (j.is_object()) {
    if (j.contains("arguments")) args = &j["arguments"];
    else if (j.contains("parameters")) args = &j["parameters"];
  }
  if (j.is_object() && j.contains("name") && j["name"].is_string()) {
    std::string arguments = !args ? "{}" : args->is_string() ? args->get<std::string>() : args->dump();
    tool_calls_.push_back({j["name"].get<std::string>(), std::move(arguments)});
  } else {
    std::string raw = std::string(kToolOpen) + tool_text_ + std::string(kToolClose);
    emit(out, raw);
  }
  tool_text_.clear();
  strip_leading_space_ = true;
}

void ReplySplitter::drain(ReplyDelta& out, bool final) {
  while (!pending_.empty()) {
    // The tags that matter in this mode, and the earliest one present.
    std::vector<std::string_view> tags;
    if (mode_ == Mode::Reasoning) tags = {kThinkClose};
    else if (mode_ == Mode::Tool) tags = {kToolClose};
    else {
      if (!content_started_) tags.push_back(kThinkOpen);
      if (parse_tools_) tags.push_back(kToolOpen);
    }
    size_t best = std::string::npos;
    std::string_view best_tag;
    for (auto tag : tags) {
      size_t at = pending_.find(tag);
      // <think> opens reasoning only at the start of the reply.
      if (tag == kThinkOpen && at != std::string::npos && !trim(std::string_view(pending_).substr(0, at)).empty())
        continue;
      if (at < best) best = at, best_tag = tag;
    }
    if (best != std::string::npos) {
      emit(out, std::string_view(pending_).substr(0, best));
      pending_.erase(0, best + best_tag.size());
      if (best_tag == kThinkOpen) {
        mode_ = Mode::Reasoning;
        strip_leading_space_ = true;
      } else if (best_tag == kThinkClose) {
        mode_ = Mode::Content;
        strip_leading_space_ = true;
      } else if (best_tag == kToolOpen) {
        mode_ = Mode::Tool;
      } else {
        close_tool(out);
      }
      continue;
    }
    if (final) return;
    size_t hold = 0;
    for (auto tag : tags) hold = std::max(hold, partial_tag_suffix(pending_, tag));
    emit(out, std::string_view(pending_).substr(0, pending_.size() - hold));
    pending_.erase(0, pending_.size() - hold);
    return;
  }
}

bool prompt_opens_reasoning(std::string_view prompt) {
  std::string_view t = trim(prompt);
  return t.size() >= kThinkOpen.size() && t.substr(t.size() - kThinkOpen.size()) == kThinkOpen;
}

}  // namespace fs::server

#include "server/openai_format.h"

#include <chrono>
#include <random>

namespace fs::server {

using json = nlohmann::json;

std::string random_id(const std::string& prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* hex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += hex[rng() & 15];
  return id;
}

long long unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json usage_json(int prompt_tokens, int completion_tokens, int cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

static json token_bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

json chat_logprobs_json(const std::vector<TokenLogprob>& tokens) {
  json content = json::array();
  for (const auto& t : tokens) {
    json top = json::array();
    for (const auto& [tok, lp] : t.top) top.push_back({{"token", tok}, {"logprob", lp}, {"bytes", token_bytes(tok)}});
    content.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", token_bytes(t.token)}, {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs_json(const std::vector<TokenLogprob>& tokens, size_t text_offset) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& t : tokens) {
    toks.push_back(t.token);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const auto& [tok, lp] : t.top) top[tok] = lp;
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += t.token.size();
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json tool_calls_json(const std::vector<ToolCall>& calls, size_t first, bool with_index) {
  json out = json::array();
  for (size_t i = first; i < calls.size(); ++i) {
    json c = {{"id", random_id("call_")},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) c["index"] = i;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace fs::server

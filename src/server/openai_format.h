#pragma once
// The JSON objects OpenAI clients expect: ids, usage, logprobs in the chat and the legacy completion shapes,
// tool calls.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/generation_run.h"
#include "server/reply_splitter.h"

namespace fs::server {

// PREFIX + 24 random hex digits ("chatcmpl-…", "cmpl-…", "call_…").
std::string random_id(const std::string& prefix);
long long unix_seconds();

nlohmann::json usage_json(int prompt_tokens, int completion_tokens, int cached_tokens);
// Chat shape: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]}.
nlohmann::json chat_logprobs_json(const std::vector<TokenLogprob>& tokens);
// Legacy completion shape: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}; offsets
// count from `text_offset`.
nlohmann::json completion_logprobs_json(const std::vector<TokenLogprob>& tokens, size_t text_offset);
// tool_calls[first..] as OpenAI message tool calls; `with_index` adds the streaming "index".
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, size_t first, bool with_index);

}  // namespace fs::server

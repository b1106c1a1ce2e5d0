#pragma once
// OpenAI request bodies parsed and validated into plain structs. The parsers are pure: a body in, a request or an
// ApiError (with the offending param named) out; nothing else is touched.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"
#include "io/hf_config.h"
#include "server/api_error.h"

namespace fs::server {

// Settings shared by chat and text completions.
struct GenerationFields {
  std::optional<int> max_tokens;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  std::optional<uint64_t> seed;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::string> stop;
  bool logprobs = false;
  int top_logprobs = 0;
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  bool allow_draft = true;
};

struct ChatRequest {
  std::string model;
  nlohmann::json messages;  // validated; text parts joined into string content
  nlohmann::json tools;     // array or null (null when tool_choice is "none")
  nlohmann::json template_kwargs = nlohmann::json::object();
  GenerationFields gen;
};

// One prompt of a text completion: text or token ids.
struct PromptInput {
  std::optional<std::string> text;
  std::vector<int32_t> ids;
};

struct CompletionRequest {
  std::string model;
  std::vector<PromptInput> prompts;
  GenerationFields gen;
};

struct ParseLimits {
  std::string served_model;  // a request naming another model → 404
  int max_n = 16;            // most choices per request
  int max_prompts = 16;      // most prompts in one text completion
  int32_t vocab_size = 0;    // token ids must be below this (0 → unchecked)
};

template <class T>
using Parsed = std::variant<T, ApiError>;

Parsed<ChatRequest> parse_chat_request(std::string_view body, const ParseLimits& limits);
Parsed<CompletionRequest> parse_completion_request(std::string_view body, const ParseLimits& limits);

// The engine's sampling settings: the request's values, else the model's generation_config (greedy when it does
// not sample), else OpenAI's defaults.
SamplingParams resolve_sampling(const GenerationFields& gen, const GenerationConfig& defaults);

}  // namespace fs::server

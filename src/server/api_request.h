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
#include "server/output_constraint.h"

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
  bool tokens_as_ids = false;  // return_tokens_as_token_ids (as vLLM): logprob tokens read "token_id:N"
  std::optional<RequestedConstraint> constraint;  // response_format / regex / a forced tool call
};

// An image part of a chat message: its URL (data: or http(s)) and where it sat in the request.
struct ImageRef {
  std::string url;
  std::string param;  // "messages[i].content[j]"
};

// Bodies are parsed as ordered JSON so the template's `tojson` shows the client's key order, as transformers does.
struct ChatRequest {
  std::string model;
  // Validated. Content without images: text parts joined into one string; with images: a list of {"type": "text",
  // "text"} and {"type": "image"} parts in the client's order.
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;  // array or null (null when tool_choice is "none")
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  std::vector<ImageRef> images;  // in prompt order
  GenerationFields gen;
  std::optional<bool> literal_content;  // extension: message content never becomes control tokens
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
  // Why image parts are refused ("" → accepted).
  std::string image_refusal = "image input is off on this server; start it with --vision";
  int max_images = 16;        // most image parts in one chat request
  // Text that message content may not contain (a vision model's placeholder tokens, which would inject images).
  std::vector<std::string> reserved_text;
};

template <class T>
using Parsed = std::variant<T, ApiError>;

Parsed<ChatRequest> parse_chat_request(std::string_view body, const ParseLimits& limits);
Parsed<CompletionRequest> parse_completion_request(std::string_view body, const ParseLimits& limits);

// The engine's sampling settings: the request's values, else the model's generation_config (greedy when it does
// not sample), else OpenAI's defaults.
SamplingParams resolve_sampling(const GenerationFields& gen, const GenerationConfig& defaults);

}  // namespace fs::server

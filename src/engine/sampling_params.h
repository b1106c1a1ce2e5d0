#pragma once
// Per-request sampling settings (OpenAI names) and the result of one sampled token.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace fs {

struct SamplingParams {
  float temperature = 1.0f;  // 0 → greedy
  float top_p = 1.0f;
  int top_k = 0;  // 0 → off
  float min_p = 0.0f;
  std::optional<uint64_t> seed;  // none → a seed drawn per request
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  bool logprobs = false;
  int top_logprobs = 0;  // 0..20
};

struct SampledToken {
  int32_t id = -1;
  float logprob = 0.0f;  // of the chosen token under the unmodified distribution
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

}  // namespace fs

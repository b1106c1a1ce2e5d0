#pragma once
// Picks the next token from one row of logits: penalties, temperature, top-k, top-p, min-p, and a random draw
// keyed by (seed, position) so a seeded reply never depends on other streams.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"

namespace fs {

// How often each token occurs in the prompt and in the reply so far, for penalties.
struct TokenCounts {
  std::unordered_map<int32_t, int> prompt;
  std::unordered_map<int32_t, int> reply;
};

// A uniform double in [0, 1) from (seed, position).
double keyed_uniform(uint64_t seed, uint64_t position);

// Whether a repetition, presence or frequency penalty is set.
bool has_penalties(const SamplingParams& params);

// The token a temperature draw picks with uniform `u` (top-k, min-p, top-p as in sample_token; no penalties).
int32_t draw_token(std::span<const float> logits, const SamplingParams& params, double u);

// Logprobs under `logits` as they are: the log-sum-exp, and the `top` best ids (ties by lowest id) with theirs.
struct LogprobTable {
  float log_sum_exp = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
};
LogprobTable logprob_table(std::span<const float> logits, int top);

// `logits` is modified (penalties, temperature). `position` is the index of the token being chosen.
SampledToken sample_token(std::span<float> logits, const SamplingParams& params, const TokenCounts& counts,
                          uint64_t seed, uint64_t position);

}  // namespace fs

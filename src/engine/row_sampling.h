#pragma once
// The engine's choice, per request, between sampling on the host from logits and letting the model pick the token.
#include <cstdint>
#include <optional>

#include "engine/sampling_params.h"
#include "models/model.h"

namespace fs {

// Whether the model may pick this request's tokens (and give their logprobs): no penalties. Depends on the request
// alone, so a request takes the same route whatever runs beside it.
bool device_sampleable(const SamplingParams& p);

// The row's RowSampling: Logits when `on_device` is false, else Greedy (temperature ≤ 0) or Draw with the request's
// keyed draw for `position` (the index of the token being chosen), asking for the request's logprobs.
RowSampling row_sampling_for(const SamplingParams& p, bool on_device, uint64_t seed, uint64_t position);

// The model's pick of logit row `row` with the logprobs it gave, when the row asked for them.
std::optional<SampledToken> picked_with_logprobs(const SampledForward& out, size_t row);

}  // namespace fs

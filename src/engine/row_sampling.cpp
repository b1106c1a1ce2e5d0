#include "engine/row_sampling.h"

#include <algorithm>

#include "engine/sampler.h"

namespace fs {

bool device_sampleable(const SamplingParams& p) {
  return !has_penalties(p);
}

RowSampling row_sampling_for(const SamplingParams& p, bool on_device, uint64_t seed, uint64_t position) {
  RowSampling r;
  if (!on_device) return r;
  if (p.logprobs) r.logprobs = std::clamp(p.top_logprobs, 0, kMaxTopLogprobs);
  if (p.temperature <= 0.0f) {
    r.mode = RowSampling::Mode::Greedy;
    return r;
  }
  r.mode = RowSampling::Mode::Draw;
  r.temperature = p.temperature;
  r.top_k = p.top_k;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.uniform = keyed_uniform(seed, position);
  return r;
}

std::optional<SampledToken> picked_with_logprobs(const SampledForward& out, size_t row) {
  if (out.ids[row] < 0 || row >= out.logprobs.size() || !out.logprobs[row].asked) return std::nullopt;
  SampledToken t;
  t.id = out.ids[row];
  t.logprob = out.logprobs[row].chosen;
  t.top_logprobs = out.logprobs[row].top;
  return t;
}

}  // namespace fs

#include "engine/row_sampling.h"

#include "engine/sampler.h"

namespace fs {

bool device_sampleable(const SamplingParams& p) {
  return p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f && p.repetition_penalty == 1.0f && !p.logprobs &&
         p.top_logprobs == 0;
}

RowSampling row_sampling_for(const SamplingParams& p, bool on_device, uint64_t seed, uint64_t position) {
  RowSampling r;
  if (!on_device) return r;
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

}  // namespace fs

#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/hash.h"

namespace fs {

namespace {

// log-softmax of the unmodified logits, for reported logprobs.
std::vector<float> log_softmax(std::span<const float> logits) {
  float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - mx);
  float lse = mx + float(std::log(sum));
  std::vector<float> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - lse;
  return out;
}

void apply_penalties(std::span<float> logits, const SamplingParams& p, const TokenCounts& counts) {
  if (p.repetition_penalty != 1.0f) {
    auto penalize = [&](int32_t id) {
      float& l = logits[size_t(id)];
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    };
    for (const auto& [id, _] : counts.prompt) penalize(id);
    for (const auto& [id, _] : counts.reply)
      if (!counts.prompt.count(id)) penalize(id);
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f)
    for (const auto& [id, n] : counts.reply)
      logits[size_t(id)] -= p.frequency_penalty * float(n) + p.presence_penalty;
}

// Lowest id among the largest logits.
int32_t argmax(std::span<const float> logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t draw(std::span<const float> logits, const SamplingParams& p, double u) {
  const float inv_t = 1.0f / p.temperature;
  float mx = *std::max_element(logits.begin(), logits.end());
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;
  };
  size_t keep = order.size();
  if (p.top_k > 0 && size_t(p.top_k) < keep) {
    keep = size_t(p.top_k);
    std::partial_sort(order.begin(), order.begin() + long(keep), order.end(), by_logit);
  } else {
    std::sort(order.begin(), order.end(), by_logit);
  }
  std::vector<double> prob(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += (prob[i] = std::exp(double(logits[size_t(order[i])] - mx) * inv_t));
  size_t cut = keep;
  if (p.min_p > 0.0f) {
    double floor = prob[0] * p.min_p;
    cut = 1;
    while (cut < keep && prob[cut] >= floor) ++cut;
  }
  if (p.top_p < 1.0f) {
    double acc = 0;
    size_t n = 0;
    while (n < cut) {
      acc += prob[n++] / total;
      if (acc >= p.top_p) break;
    }
    cut = std::max<size_t>(n, 1);
  }
  double mass = 0;
  for (size_t i = 0; i < cut; ++i) mass += prob[i];
  double target = u * mass, acc = 0;
  for (size_t i = 0; i < cut; ++i) {
    acc += prob[i];
    if (target < acc) return order[i];
  }
  return order[cut - 1];
}

}  // namespace

int32_t draw_token(std::span<const float> logits, const SamplingParams& params, double u) {
  return draw(logits, params, u);
}

double keyed_uniform(uint64_t seed, uint64_t position) {
  uint64_t bits = splitmix64(splitmix64(seed) ^ (position * 0xd1b54a32d192ed03ull));
  return double(bits >> 11) * (1.0 / 9007199254740992.0);
}

SampledToken sample_token(std::span<float> logits, const SamplingParams& params, const TokenCounts& counts,
                          uint64_t seed, uint64_t position) {
  SampledToken out;
  std::vector<float> lp;
  if (params.logprobs) lp = log_softmax(logits);
  apply_penalties(logits, params, counts);
  out.id = params.temperature <= 0.0f ? argmax(logits) : draw(logits, params, keyed_uniform(seed, position));
  if (params.logprobs) {
    out.logprob = lp[size_t(out.id)];
    int n = std::clamp(params.top_logprobs, 0, 20);
    std::vector<int32_t> ids(lp.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
      return lp[size_t(a)] != lp[size_t(b)] ? lp[size_t(a)] > lp[size_t(b)] : a < b;
    });
    for (int i = 0; i < n; ++i) out.top_logprobs.emplace_back(ids[size_t(i)], lp[size_t(ids[size_t(i)])]);
  }
  return out;
}

}  // namespace fs

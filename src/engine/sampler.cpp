#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/hash.h"
#include "models/model.h"

namespace fs {

namespace {

// The log-sum-exp of logits whose largest is `mx`: a token's reported logprob is its logit minus this.
float log_sum_exp(std::span<const float> logits, float mx) {
  double sum = 0;
  for (float l : logits) sum += double(std::exp(l - mx));
  return mx + float(std::log(sum));
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

// The first band of a draw's sorted ids: logits within this many temperatures of the largest (weights ≥ e^-8).
constexpr float kFirstBandWeights = 8.0f;
// The first band of the reported top logprobs: logits within this much of the largest.
constexpr float kFirstBandLogprobs = 4.0f;

// The sampler's order of token ids: logit descending, ties by lowest id.
struct ByLogit {
  std::span<const float> l;
  bool operator()(int32_t a, int32_t b) const {
    return l[size_t(a)] != l[size_t(b)] ? l[size_t(a)] > l[size_t(b)] : a < b;
  }
};

// Token ids in ByLogit's order, found only as far as a caller reads. Ids are gathered in bands of logit value (the
// first holds those within `step` of the largest logit, each next one twice as deep), and a band is sorted in
// doubling prefixes, so reading the first k ids of a row costs a pass or two over it and a sort of about k ids.
class SortedPrefix {
 public:
  // `top`: the largest logit.
  SortedPrefix(std::span<const float> logits, float top, float step) : logits_(logits), top_(top), step_(step) {}
  size_t size() const { return logits_.size(); }
  int32_t at(size_t i) {
    while (i >= ids_.size() && bands_ < kBands) gather_next_band();
    if (i >= sorted_) {
      size_t end = std::min(ids_.size(), std::max({i + 1, 2 * sorted_, size_t(256)}));
      if (end * 8 > ids_.size()) end = ids_.size();  // deep walks sort the whole gathered band at once
      const auto first = ids_.begin() + long(sorted_), last = ids_.begin() + long(end);
      if (end <= kHeapPrefix) {
        std::partial_sort(first, last, ids_.end(), ByLogit{logits_});
      } else {
        std::nth_element(first, last - 1, ids_.end(), ByLogit{logits_});
        std::sort(first, last, ByLogit{logits_});
      }
      sorted_ = end;
    }
    return ids_[i];
  }

 private:
  // Appends the ids below the last band down to the next floor (every id left, in the last band).
  void gather_next_band() {
    const bool first = bands_ == 0, last = bands_ == kBands - 1;
    depth_ += step_ * float(1u << bands_++);
    const float floor = top_ - depth_;
    for (size_t id = 0; id < logits_.size(); ++id) {
      const float l = logits_[id];
      if ((first || !(l >= ceiling_)) && (last || l >= floor)) ids_.push_back(int32_t(id));
    }
    ceiling_ = floor;
  }

  static constexpr int kBands = 24;
  static constexpr size_t kHeapPrefix = 1024;  // prefixes up to this long are taken by a heap pass over the band
  std::span<const float> logits_;
  float top_, step_;
  std::vector<int32_t> ids_;  // the bands gathered so far, sorted up to sorted_
  size_t sorted_ = 0;
  float ceiling_ = 0;  // the last band's floor: every id whose logit is at least this is in ids_
  float depth_ = 0;
  int bands_ = 0;
};

// Walks the kept ids in the sampler's order: min-p and top-p cut the walk, then the draw takes the first id whose
// running weight passes u × the cut's weight. Weights are exp((logit − max) / T). Without top-k the total is summed
// in id order, so a draw sorts only the ids its walk reaches.
int32_t draw(std::span<const float> logits, const SamplingParams& p, double u) {
  const float inv_t = 1.0f / p.temperature;
  const float mx = *std::max_element(logits.begin(), logits.end());
  auto weight_of = [&](int32_t id) { return double(std::exp((logits[size_t(id)] - mx) * inv_t)); };
  SortedPrefix order(logits, mx, kFirstBandWeights * p.temperature);
  std::vector<double> weights;  // of the ids in order, as far as read
  auto weight = [&](size_t i) {
    while (weights.size() <= i) weights.push_back(weight_of(order.at(weights.size())));
    return weights[i];
  };
  const size_t keep = p.top_k > 0 ? std::min(size_t(p.top_k), logits.size()) : logits.size();
  double total = 0;
  if (keep < logits.size())
    for (size_t i = 0; i < keep; ++i) total += weight(i);
  else
    for (size_t id = 0; id < logits.size(); ++id) total += weight_of(int32_t(id));
  size_t cut = keep;
  if (p.min_p > 0.0f) {
    const double floor = weight(0) * p.min_p;
    cut = 1;
    while (cut < keep && weight(cut) >= floor) ++cut;
  }
  if (p.top_p < 1.0f) {
    double acc = 0;
    size_t n = 0;
    while (n < cut) {
      acc += weight(n++) / total;
      if (acc >= p.top_p) break;
    }
    cut = std::max<size_t>(n, 1);
  }
  double mass = total;
  if (cut < keep) {
    mass = 0;
    for (size_t i = 0; i < cut; ++i) mass += weight(i);
  }
  const double target = u * mass;
  double acc = 0;
  for (size_t i = 0; i < cut; ++i) {
    acc += weight(i);
    if (target < acc) return order.at(i);
  }
  return order.at(cut - 1);
}

}  // namespace

bool has_penalties(const SamplingParams& p) {
  return p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f || p.repetition_penalty != 1.0f;
}

int32_t draw_token(std::span<const float> logits, const SamplingParams& params, double u) {
  return draw(logits, params, u);
}

double keyed_uniform(uint64_t seed, uint64_t position) {
  uint64_t bits = splitmix64(splitmix64(seed) ^ (position * 0xd1b54a32d192ed03ull));
  return double(bits >> 11) * (1.0 / 9007199254740992.0);
}

LogprobTable logprob_table(std::span<const float> logits, int top) {
  LogprobTable t;
  const float mx = *std::max_element(logits.begin(), logits.end());
  t.log_sum_exp = log_sum_exp(logits, mx);
  SortedPrefix best(logits, mx, kFirstBandLogprobs);
  for (size_t i = 0; i < size_t(std::clamp(top, 0, kMaxTopLogprobs)) && i < best.size(); ++i) {
    const int32_t id = best.at(i);
    t.top.emplace_back(id, logits[size_t(id)] - t.log_sum_exp);
  }
  return t;
}

SampledToken sample_token(std::span<float> logits, const SamplingParams& params, const TokenCounts& counts,
                          uint64_t seed, uint64_t position) {
  SampledToken out;
  // Reported logprobs are of the unmodified logits: the table is made, and the row kept, before penalties.
  LogprobTable table;
  std::vector<float> unmodified;
  if (params.logprobs) {
    table = logprob_table(logits, params.top_logprobs);
    out.top_logprobs = std::move(table.top);
    if (has_penalties(params)) unmodified.assign(logits.begin(), logits.end());
  }
  apply_penalties(logits, params, counts);
  out.id = params.temperature <= 0.0f ? argmax(logits) : draw(logits, params, keyed_uniform(seed, position));
  if (params.logprobs) out.logprob = (unmodified.empty() ? logits : unmodified)[size_t(out.id)] - table.log_sum_exp;
  return out;
}

}  // namespace fs

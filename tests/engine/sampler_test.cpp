// The host sampler against a plain reference that sorts every id: the same draws (up to rows whose draw lands
// within rounding of a boundary), the same greedy picks, logprobs and top logprobs, on random rows of several
// vocabulary sizes, flat and peaked, with ties, -inf (masked) logits and penalties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "engine/sampler.h"

namespace fs::test {
namespace {

constexpr double kFragile = 1e-5;  // relative distance to a boundary below which rounding may move a draw

std::vector<int32_t> sorted_ids(const std::vector<float>& l) {
  std::vector<int32_t> ids(l.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[size_t(a)] > l[size_t(b)]; });
  return ids;
}

// The draw as specified, every weight in double over the fully sorted row; nullopt when the draw lies within
// kFragile of a boundary (a top-p or min-p cut, or the running weight crossing the target).
std::optional<int32_t> reference_draw(const std::vector<float>& l, const SamplingParams& p, double u) {
  const auto ids = sorted_ids(l);
  const double mx = l[size_t(ids[0])];
  const size_t keep = p.top_k > 0 ? std::min(size_t(p.top_k), l.size()) : l.size();
  std::vector<double> w(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += w[i] = std::exp((double(l[size_t(ids[i])]) - mx) / p.temperature);
  size_t cut = keep;
  if (p.min_p > 0.0f) {
    const double floor = w[0] * p.min_p;
    cut = 1;
    while (cut < keep && w[cut] >= floor) {
      if (std::abs(w[cut] - floor) < kFragile * floor) return std::nullopt;
      ++cut;
    }
    if (cut < keep && std::abs(w[cut] - floor) < kFragile * floor) return std::nullopt;
  }
  if (p.top_p < 1.0f) {
    double acc = 0;
    size_t n = 0;
    while (n < cut) {
      acc += w[n++] / total;
      if (std::abs(acc - p.top_p) < kFragile) return std::nullopt;
      if (acc >= p.top_p) break;
    }
    cut = std::max<size_t>(n, 1);
  }
  double mass = 0;
  for (size_t i = 0; i < cut; ++i) mass += w[i];
  double acc = 0;
  for (size_t i = 0; i < cut; ++i) {
    acc += w[i];
    if (std::abs(acc - u * mass) < kFragile * mass) return std::nullopt;
    if (u * mass < acc) return ids[i];
  }
  return ids[cut - 1];
}

// A random row: normal logits of spread `scale`, every fourth row rounded to quarters (many ties), a few -inf.
std::vector<float> random_row(std::mt19937& rng, size_t vocab, float scale, bool ties) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> l(vocab);
  for (auto& x : l) x = ties ? std::round(normal(rng) * 4.0f) / 4.0f : normal(rng);
  for (size_t i = 0; i < vocab / 50; ++i) l[rng() % vocab] = -INFINITY;
  return l;
}

TEST(Sampler, DrawsEqualTheFullySortedReference) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u01(0.0f, 1.0f);
  int compared = 0, fragile = 0;
  for (size_t vocab : {size_t(3), size_t(1000), size_t(32003), size_t(128256)}) {
    for (int i = 0; i < 48; ++i) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + " row " + std::to_string(i));
      const auto l = random_row(rng, vocab, i % 3 == 0 ? 1.0f : 6.0f, i % 4 == 1);
      SamplingParams p;
      p.temperature = 0.2f + 1.6f * u01(rng);
      switch (i % 6) {
        case 0: break;
        case 1: p.top_k = 1 + int(u01(rng) * 60); break;
        case 2: p.top_p = 0.1f + 0.85f * u01(rng); break;
        case 3: p.min_p = 0.01f + 0.3f * u01(rng); break;
        case 4: p.top_k = 40, p.top_p = 0.9f, p.min_p = 0.05f; break;
        case 5: p.top_k = 1 + int(u01(rng) * float(vocab)), p.top_p = 0.7f; break;
      }
      const double u = double(u01(rng));
      const auto want = reference_draw(l, p, u);
      if (!want) {
        ++fragile;
        continue;
      }
      ++compared;
      EXPECT_EQ(draw_token(l, p, u), *want) << "temperature " << p.temperature << " top_k " << p.top_k << " top_p "
                                            << p.top_p << " min_p " << p.min_p << " u " << u;
    }
  }
  EXPECT_GT(compared, 9 * fragile);
}

TEST(Sampler, GreedyPicksAndLogprobsEqualTheReference) {
  std::mt19937 rng(9);
  for (size_t vocab : {size_t(2), size_t(1000), size_t(151936)}) {
    for (int i = 0; i < 12; ++i) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + " row " + std::to_string(i));
      const auto l = random_row(rng, vocab, i % 2 ? 0.5f : 8.0f, i % 3 == 0);
      const auto ids = sorted_ids(l);
      double sum = 0;
      for (float x : l) sum += std::exp(double(x) - double(l[size_t(ids[0])]));
      const double lse = double(l[size_t(ids[0])]) + std::log(sum);
      SamplingParams p;
      p.temperature = 0.0f;
      p.logprobs = true;
      p.top_logprobs = i % 4 == 0 ? 0 : 1 + i % 20;
      TokenCounts counts;
      if (i % 5 == 2) counts.reply[ids[0]] = 2, p.frequency_penalty = 1e6f;  // moves the pick off the best id
      auto row = l;
      const SampledToken t = sample_token(row, p, counts, 1, 0);
      EXPECT_EQ(t.id, counts.reply.empty() ? ids[0] : ids[1]);
      EXPECT_NEAR(t.logprob, double(l[size_t(t.id)]) - lse, 1e-4);
      ASSERT_EQ(t.top_logprobs.size(), std::min(size_t(p.top_logprobs), vocab));
      for (size_t k = 0; k < t.top_logprobs.size(); ++k) {
        EXPECT_EQ(t.top_logprobs[k].first, ids[k]) << k;
        EXPECT_NEAR(t.top_logprobs[k].second, double(l[size_t(ids[k])]) - lse, 1e-4) << k;
      }
    }
  }
}

}  // namespace
}  // namespace fs::test

// The device sampler against the host sampler on random logits: greedy ids exact (ties → lowest id), draws equal to
// the host's choice with the same uniform wherever no boundary is within rounding, logprobs equal to the host's
// within rounding, rows independent of their neighbours and of repetition.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "backends/cuda/kernels/sample_ops.h"
#include "core/error.h"
#include "engine/sampler.h"
#include "gpu_fixture.h"

namespace fs::test {
namespace {

namespace k = cuda::kernels;

struct Case {
  std::vector<float> logits;
  k::SampleRow row;
};

// Whether some decision of the host draw lies within `eps` of its bound, where float arithmetic may decide otherwise.
bool fragile(const std::vector<float>& l, const k::SampleRow& r, double eps = 1e-4) {
  if (r.mode != 2) return false;
  std::vector<int32_t> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[size_t(a)] > l[size_t(b)]; });
  size_t keep = r.top_k > 0 && size_t(r.top_k) < l.size() ? size_t(r.top_k) : l.size();
  const double mx = l[size_t(order[0])], inv_t = 1.0 / r.temperature;
  std::vector<double> prob(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += prob[i] = std::exp((l[size_t(order[i])] - mx) * inv_t);
  // Near-equal logits at the top-k edge order by float rounding of the probabilities only in ties, which match.
  size_t cut = keep;
  if (r.min_p > 0) {
    cut = 1;
    while (cut < keep && prob[cut] >= r.min_p) ++cut;
    for (size_t i = 1; i < keep; ++i)
      if (std::abs(prob[i] - r.min_p) < eps * std::max(1e-30, double(r.min_p))) return true;
  }
  if (r.top_p < 1) {
    double acc = 0;
    for (size_t i = 0; i < cut; ++i) {
      acc += prob[i] / total;
      if (std::abs(acc - r.top_p) < eps) return true;
      if (acc >= r.top_p) {
        cut = i + 1;
        break;
      }
    }
  }
  double mass = 0;
  for (size_t i = 0; i < cut; ++i) mass += prob[i];
  const double target = double(r.uniform) * mass;
  double acc = 0;
  for (size_t i = 0; i < cut; ++i) {
    acc += prob[i];
    if (std::abs(acc - target) < eps * mass) return true;
  }
  return false;
}

int32_t host_choice(const std::vector<float>& l, const k::SampleRow& r) {
  if (r.mode == 0) return -1;
  if (r.mode == 1) return int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  SamplingParams p;
  p.temperature = r.temperature;
  p.top_k = r.top_k;
  p.top_p = r.top_p;
  p.min_p = r.min_p;
  return draw_token(l, p, double(r.uniform));
}

// The device's ids for `cases`, and the logprob records of the rows that asked for them.
std::vector<int32_t> device_choice(Gpu& gpu, const std::vector<Case>& cases, int vocab,
                                   std::vector<k::LogprobRecord>* records = nullptr) {
  std::vector<float> all;
  std::vector<k::SampleRow> rows;
  for (const auto& c : cases) {
    all.insert(all.end(), c.logits.begin(), c.logits.end());
    rows.push_back(c.row);
  }
  auto* ids = gpu.poisoned<int32_t>(cases.size());
  auto* recs = gpu.poisoned<k::LogprobRecord>(cases.size());
  k::sample_rows(gpu.upload(all), int(cases.size()), vocab, gpu.upload(rows), ids, recs, gpu.stream());
  if (records) *records = gpu.download(recs, cases.size());
  return gpu.download(ids, cases.size());
}

// Random rows of every kind; `ties` rounds logits to quarters so many tie.
std::vector<Case> random_cases(std::mt19937& rng, int vocab, int n, bool ties) {
  std::uniform_real_distribution<float> u01(0.0f, 1.0f);
  std::vector<Case> cases;
  for (int i = 0; i < n; ++i) {
    Case c;
    c.logits = random_floats(rng, size_t(vocab), 3.0f);
    if (ties)
      for (auto& x : c.logits) x = std::round(x * 4.0f) / 4.0f;
    if (i % 9 == 4) c.logits[size_t(vocab) / 2] = -0.0f, c.logits[0] = 0.0f;
    c.row.mode = i % 7 == 0 ? 0 : (i % 3 == 1 ? 1 : 2);
    c.row.temperature = 0.3f + 1.2f * u01(rng);
    c.row.uniform = std::min(u01(rng), 0x1.fffffep-1f);
    switch (i % 6) {
      case 0: break;
      case 1: c.row.top_k = 1 + int(u01(rng) * 50); break;
      case 2: c.row.top_p = 0.2f + 0.75f * u01(rng); break;
      case 3: c.row.min_p = 0.01f + 0.2f * u01(rng); break;
      case 4: c.row.top_k = 40, c.row.top_p = 0.9f, c.row.min_p = 0.05f; break;
      case 5: c.row.top_k = 1 + int(u01(rng) * float(vocab)), c.row.top_p = 0.5f; break;
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

TEST(CudaSampling, MatchesHostSamplerOnRandomLogits) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(17);
  int compared = 0, skipped = 0;
  for (int vocab : {1, 7, 1000, 8192, 32003, 151936}) {
    for (bool ties : {false, true}) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + (ties ? " ties" : ""));
      auto cases = random_cases(rng, vocab, vocab > 100000 ? 24 : 60, ties);
      auto got = device_choice(gpu, cases, vocab);
      for (size_t i = 0; i < cases.size(); ++i) {
        const auto& c = cases[i];
        const int32_t want = host_choice(c.logits, c.row);
        if (c.row.mode != 2 || !fragile(c.logits, c.row)) {
          EXPECT_EQ(got[i], want) << "row " << i << " mode " << c.row.mode << " top_k " << c.row.top_k << " top_p "
                                  << c.row.top_p << " min_p " << c.row.min_p;
          ++compared;
        } else {
          ++skipped;
          EXPECT_GE(got[i], 0);
          EXPECT_LT(got[i], vocab);
        }
      }
    }
  }
  std::printf("[ sampling ] %d rows equal the host sampler, %d within rounding of a bound\n", compared, skipped);
  EXPECT_LT(skipped * 20, compared);
}

// Uniforms within rounding of 1 put the draw's target at the set's whole mass, which the threshold search sums in
// another order: the draw must still be a token of the set (the last one), never past the vocabulary.
TEST(CudaSampling, DrawsAtTheTopOfTheUniformRangeStayInTheSet) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(29);
  constexpr int kVocab = 151936;
  std::vector<Case> cases;
  for (float uniform : {0x1.fffffep-1f, 0x1.fffffcp-1f, 0x1.fffff0p-1f, 0x1.ffffc0p-1f, 0.9999f})
    for (float scale : {0.01f, 0.5f, 3.0f}) {
      Case c;
      c.logits = random_floats(rng, size_t(kVocab), scale);
      c.row.mode = 2;
      c.row.temperature = 0.8f;
      c.row.uniform = uniform;
      cases.push_back(c);
      c.row.top_k = 50;
      cases.push_back(c);
    }
  const auto got = device_choice(gpu, cases, kVocab);
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_GE(got[i], 0) << "row " << i;
    ASSERT_LT(got[i], kVocab) << "row " << i;
    if (cases[i].row.top_k > 0) {
      // Inside the top k: fewer than k logits rank above it.
      const auto& l = cases[i].logits;
      const float x = l[size_t(got[i])];
      const auto above = std::count_if(l.begin(), l.end(), [&](float y) { return y > x; });
      EXPECT_LT(above, cases[i].row.top_k) << "row " << i;
    }
  }
}

TEST(CudaSampling, GreedyTiesGoToTheLowestId) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::vector<Case> cases;
  for (int top : {0, 5, 99}) {
    Case c;
    c.logits.assign(100, 1.0f);
    c.logits[size_t(top)] = 2.0f;
    for (int j = top; j < 100; j += 7) c.logits[size_t(j)] = 2.0f;
    c.row.mode = 1;
    cases.push_back(c);
    c.row.mode = 2, c.row.top_k = 1, c.row.uniform = 0.99f;  // top-k 1 is greedy too
    cases.push_back(c);
  }
  auto ids = device_choice(gpu, cases, 100);
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(ids[i], host_choice(cases[i].logits, cases[i].row)) << i;
  // Ties far apart in a long row, which different blocks of the row's cluster read.
  std::vector<Case> wide(3);
  for (size_t i = 0; i < wide.size(); ++i) {
    wide[i].logits.assign(20000, -3.0f);
    for (int j : {19999, 9000, 4600, 513}) wide[i].logits[size_t(j)] = 4.0f;
    wide[i].logits[513] = i == 1 ? 3.0f : 4.0f;  // the second row's lowest tie is at 4600
    wide[i].row.mode = i == 2 ? 2 : 1;
    wide[i].row.top_k = 1;
  }
  const auto wide_ids = device_choice(gpu, wide, 20000);
  for (size_t i = 0; i < wide.size(); ++i) EXPECT_EQ(wide_ids[i], host_choice(wide[i].logits, wide[i].row)) << i;
  EXPECT_EQ(wide_ids[1], 4600);
  Case z;  // -0 and +0 tie
  z.logits = {-1.0f, -0.0f, 0.0f};
  z.row.mode = 1;
  EXPECT_EQ(device_choice(gpu, {z}, 3)[0], 1);
  EXPECT_EQ(host_choice(z.logits, z.row), 1);
}

TEST(CudaSampling, RowsDoNotDependOnTheirNeighbours) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(3);
  const int vocab = 151936;
  auto cases = random_cases(rng, vocab, 14, false);
  auto together = device_choice(gpu, cases, vocab);
  auto again = device_choice(gpu, cases, vocab);
  EXPECT_EQ(together, again);
  std::vector<Case> shuffled(cases.rbegin(), cases.rend());
  auto reversed = device_choice(gpu, shuffled, vocab);
  for (size_t i = 0; i < cases.size(); ++i) {
    auto alone = device_choice(gpu, {cases[i]}, vocab);
    EXPECT_EQ(alone[0], together[i]) << i;
    EXPECT_EQ(reversed[cases.size() - 1 - i], together[i]) << i;
  }
}

// Rows asking for logprobs get the host's: the chosen id's logprob and the top ones (ids equal, ties by lowest id,
// values within float rounding of the log-sum-exp), whatever their mode, beside rows that ask for none.
TEST(CudaSampling, LogprobsEqualTheHostsOnRandomLogits) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  std::mt19937 rng(41);
  for (int vocab : {1, 7, 1000, 128256, 151936}) {
    for (bool ties : {false, true}) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + (ties ? " ties" : ""));
      auto cases = random_cases(rng, vocab, 20, ties);
      // Rows flat at the top (every logit equal, or all within 1/64): more candidates than the bucket pass takes.
      for (float spread : {0.0f, 1e-3f}) {
        Case flat;
        flat.logits.assign(size_t(vocab), 0.5f);
        if (spread > 0.0f) flat.logits = random_floats(rng, size_t(vocab), spread);
        flat.row.mode = 1;
        cases.push_back(flat);
      }
      for (size_t i = 0; i < cases.size(); ++i) cases[i].row.logprobs = i % 5 == 4 ? -1 : int(i * 7 % 21);
      cases.back().row.logprobs = 20;
      std::vector<k::LogprobRecord> records;
      const auto ids = device_choice(gpu, cases, vocab, &records);
      for (size_t i = 0; i < cases.size(); ++i) {
        const auto& c = cases[i];
        if (c.row.mode == 0 || c.row.logprobs < 0) continue;
        const LogprobTable host = logprob_table(c.logits, c.row.logprobs);
        const float tolerance = 1e-5f * std::max(1.0f, std::abs(host.log_sum_exp));
        EXPECT_NEAR(records[i].chosen, c.logits[size_t(ids[i])] - host.log_sum_exp, tolerance) << "row " << i;
        ASSERT_EQ(records[i].count, int(host.top.size())) << "row " << i;
        for (size_t j = 0; j < host.top.size(); ++j) {
          EXPECT_EQ(records[i].top_ids[j], host.top[j].first) << "row " << i << " rank " << j;
          EXPECT_NEAR(records[i].top_logprobs[j], host.top[j].second, tolerance) << "row " << i << " rank " << j;
        }
      }
    }
  }
}

TEST(CudaSampling, RefusesVocabulariesItCannotIndex) {
  FS_REQUIRE_GPU();
  Gpu gpu;
  auto* ids = gpu.poisoned<int32_t>(1);
  EXPECT_THROW(k::sample_rows(nullptr, 1, k::kMaxSampleVocab + 1, nullptr, ids, nullptr, gpu.stream()), Error);
  EXPECT_THROW(k::sample_rows(nullptr, 1, 0, nullptr, ids, nullptr, gpu.stream()), Error);
}

}  // namespace
}  // namespace fs::test

#pragma once
// Token choice on the device from rows of logits: greedy, and temperature draws with top-k, min-p and top-p from an
// uploaded uniform, with the logprobs a row asks for. A cluster of blocks per row finds its best key, then one block
// goes on with fixed-order sums, so a row's id and logprobs depend only on its logits and request. Hopper (sm_90)
// and later: the clusters.
#include <cstdint>

namespace fs::cuda::kernels {

// Most top logprobs a row may ask for.
constexpr int kMaxTopLogprobs = 20;

// One row's request, uploaded as seven 32-bit words.
struct SampleRow {
  int32_t mode = 0;  // 0 → not sampled here (id -1), 1 → argmax (lowest id among ties), 2 → draw
  int32_t top_k = 0;  // 0 → off
  float temperature = 1.0f;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float uniform = 0.0f;  // in [0, 1)
  int32_t logprobs = -1;  // ≥ 0: the chosen id's logprob and this many top ones (up to kMaxTopLogprobs)
};
static_assert(sizeof(SampleRow) == 28, "SampleRow is uploaded as seven words");

// A row's logprobs under its unmodified logits, written where its SampleRow asked for them: the chosen id's, then
// the `count` best ids (ties by lowest id), best first.
struct LogprobRecord {
  float chosen = 0.0f;
  int32_t count = 0;
  int32_t top_ids[kMaxTopLogprobs] = {};
  float top_logprobs[kMaxTopLogprobs] = {};
};
static_assert(sizeof(LogprobRecord) == 8 + 8 * kMaxTopLogprobs, "LogprobRecord is downloaded as words");

// Largest vocabulary the sampler handles (ids are packed into 20 bits).
constexpr int kMaxSampleVocab = 1 << 20;

// ids[r] for every row r < rows of logits [rows, vocab] f32, following params[r], and records[r] for the rows that
// ask for logprobs; throws fs::Error if vocab is out of range or the launch fails.
void sample_rows(const float* logits, int rows, int vocab, const SampleRow* params, int32_t* ids,
                 LogprobRecord* records, void* stream);

}  // namespace fs::cuda::kernels

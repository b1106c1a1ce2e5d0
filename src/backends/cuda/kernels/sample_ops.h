#pragma once
// Token choice on the device from rows of logits: greedy, and temperature draws with top-k, min-p and top-p from an
// uploaded uniform. A cluster of blocks per row finds its best key, then one block goes on with fixed-order sums, so a
// row's id depends only on its logits and request. Hopper (sm_90) and later: the clusters.
#include <cstdint>

namespace fs::cuda::kernels {

// One row's request, uploaded as six 32-bit words.
struct SampleRow {
  int32_t mode = 0;  // 0 → not sampled here (id -1), 1 → argmax (lowest id among ties), 2 → draw
  int32_t top_k = 0;  // 0 → off
  float temperature = 1.0f;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float uniform = 0.0f;  // in [0, 1)
};
static_assert(sizeof(SampleRow) == 24, "SampleRow is uploaded as six words");

// Largest vocabulary the sampler handles (ids are packed into 20 bits).
constexpr int kMaxSampleVocab = 1 << 20;

// ids[r] for every row r < rows of logits [rows, vocab] f32, following params[r]; throws fs::Error if vocab is out
// of range or the launch fails.
void sample_rows(const float* logits, int rows, int vocab, const SampleRow* params, int32_t* ids, void* stream);

}  // namespace fs::cuda::kernels

// (2) A sequence's logits alone == the same sequence among others in one forward pass, and (3) chunked == whole,
// bit for bit, on every backend.
#include <gtest/gtest.h>

#include <cstring>

#include "conformance.h"
#include "random_tokens.h"
#include "sequence_pool.h"

namespace fs::test {
namespace {

class BatchInvariance : public Conformance {};

bool same_bits(const std::vector<float>& a, const float* b, size_t n) {
  return a.size() == n && std::memcmp(a.data(), b, n * sizeof(float)) == 0;
}

TEST_P(BatchInvariance, RowsAloneEqualRowsAmongOthers) {
  const size_t V = size_t(config.vocab_size);
  const std::vector<std::vector<int32_t>> seqs{random_tokens(5, 1, config.vocab_size),
                                               random_tokens(37, 2, config.vocab_size),
                                               random_tokens(20, 3, config.vocab_size)};
  SequencePool pool(*model, 6, 64);  // sequences 0..2 alone, 3..5 together
  std::vector<std::vector<float>> alone;
  for (size_t i = 0; i < seqs.size(); ++i) alone.push_back(pool.prefill(int(i), seqs[i], int(seqs[i].size()), true));
  std::vector<SequenceChunk> chunks;
  for (size_t i = 0; i < seqs.size(); ++i) chunks.push_back(pool.chunk(int(3 + i), seqs[i], 0, true));
  auto together = pool.forward(chunks);
  ASSERT_EQ(together.size(), (5 + 37 + 20) * V);
  size_t row = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    EXPECT_TRUE(same_bits(alone[i], together.data() + row * V, seqs[i].size() * V)) << "sequence " << i;
    row += seqs[i].size();
  }
}

TEST_P(BatchInvariance, ChunkedEqualsWhole) {
  const auto ids = random_tokens(70, 4, config.vocab_size);
  SequencePool pool(*model, 1, 80);
  const auto whole = pool.prefill(0, ids, int(ids.size()), true);
  for (int chunk : {1, 3, 17, 64}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    const auto chunked = pool.prefill(0, ids, chunk, true);
    EXPECT_TRUE(same_bits(chunked, whole.data(), whole.size()));
  }
}

// Past the CUDA kernels' 1024-key attention chunks: the last logits of a 1100-token prompt whole, in chunks of 64 and
// of 300, and as 1099 tokens then one (every earlier row's attention reaches the last row through later layers).
TEST_P(BatchInvariance, LongPromptChunkedEqualsWhole) {
  const size_t V = size_t(config.vocab_size);
  const auto ids = random_tokens(1100, 6, config.vocab_size);
  SequencePool pool(*model, 1, 1104);
  const auto whole = pool.prefill(0, ids, int(ids.size()), false);
  ASSERT_EQ(whole.size(), V);
  for (int chunk : {64, 300, 1099}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    const auto chunked = pool.prefill(0, ids, chunk, false);
    ASSERT_GE(chunked.size(), V);
    EXPECT_TRUE(same_bits(whole, chunked.data() + chunked.size() - V, V));
  }
}

FS_CONFORMANCE_INSTANCES(BatchInvariance);

}  // namespace
}  // namespace fs::test

// A speculative tree window: one sequence's rows in one chunk with row parents (SequenceChunk::row_parents), in the
// same call as another sequence's long prompt chunk. Each tree row's logits must equal, bit for bit, the last of the
// one-row decode steps that feed its branch (root first) after the same prompt: a row at depth d does the arithmetic
// of the chain row at start_pos + d, whatever rows share its call.
#include <gtest/gtest.h>

#include <cstring>

#include "conformance.h"
#include "random_tokens.h"
#include "sequence_pool.h"

namespace fs::test {
namespace {

class TreeWindow : public Conformance {};

TEST_P(TreeWindow, RowsEqualTheOneRowStepsOfTheirBranch) {
  if (!model->supports_row_parents()) GTEST_SKIP() << "this model verifies chains only";
  constexpr int kPrompt = 21, kOther = 70;
  // Row 0 follows the prompt; two branches grow from it, one of them forking again, and row 6 is a third child.
  const std::vector<int32_t> parents = {-1, 0, 0, 1, 2, 3, 0, 4};
  const int rows = int(parents.size());
  const size_t V = size_t(config.vocab_size);
  const auto prompt = random_tokens(kPrompt, 7, config.vocab_size);
  const auto tokens = random_tokens(rows, 9, config.vocab_size);
  const auto other = random_tokens(kOther, 11, config.vocab_size);
  SequencePool pool(*model, 3, 128);
  std::vector<float> want(size_t(rows) * V);
  for (int r = 0; r < rows; ++r) {
    std::vector<int32_t> branch;
    for (int a = r; a >= 0; a = parents[size_t(a)]) branch.insert(branch.begin(), tokens[size_t(a)]);
    pool.prefill(0, prompt, kPrompt);
    std::vector<float> last;
    for (size_t d = 0; d < branch.size(); ++d) {
      const SequenceChunk c = pool.chunk(0, std::span<const int32_t>(&branch[d], 1), kPrompt + int(d));
      last = pool.forward(std::span<const SequenceChunk>(&c, 1));
    }
    ASSERT_EQ(last.size(), V);
    std::memcpy(want.data() + size_t(r) * V, last.data(), V * 4);
  }
  pool.prefill(1, prompt, kPrompt);
  SequenceChunk tree = pool.chunk(1, tokens, kPrompt, true);
  tree.row_parents = parents;
  const SequenceChunk chunks[] = {pool.chunk(2, other, 0), tree};
  const std::vector<float> got = pool.forward(chunks);
  ASSERT_EQ(got.size(), size_t(rows + 1) * V);  // the other sequence's last row, then every tree row
  for (int r = 0; r < rows; ++r)
    EXPECT_EQ(std::memcmp(got.data() + size_t(r + 1) * V, want.data() + size_t(r) * V, V * 4), 0)
        << "logits of tree row " << r << " (parent " << parents[size_t(r)] << ")";
}

FS_CONFORMANCE_INSTANCES(TreeWindow);

}  // namespace
}  // namespace fs::test

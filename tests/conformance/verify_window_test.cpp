// A speculative verify window: one sequence's rows in one chunk, every row's logits, a recurrent-state snapshot
// after each row but the last, and tokens drawn on the model's own sampler. Each row must equal the one-row decode
// step at its position bit for bit: its logits, its drawn id, and (with recurrent state) the state after it.
#include <gtest/gtest.h>

#include <cstring>

#include "conformance.h"
#include "random_tokens.h"
#include "sequence_pool.h"

namespace fs::test {
namespace {

class VerifyWindow : public Conformance {};

// Each row draws with its own temperature and uniform, as the engine's keyed draws do.
std::vector<RowSampling> draws(int rows) {
  std::vector<RowSampling> out(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    out[size_t(r)].mode = r % 3 == 2 ? RowSampling::Mode::Greedy : RowSampling::Mode::Draw;
    out[size_t(r)].temperature = 0.6f + 0.3f * float(r);
    out[size_t(r)].uniform = double(r * 37 % 101) / 101.0;
  }
  return out;
}

TEST_P(VerifyWindow, RowsLogitsDrawsAndStateSnapshotsEqualOneRowSteps) {
  constexpr int kPrompt = 21, kRows = 6;
  const size_t V = size_t(config.vocab_size);
  const auto prompt = random_tokens(kPrompt, 7, config.vocab_size);
  const auto window = random_tokens(kRows, 8, config.vocab_size);
  const bool stateful = model->memory_spec().has_state();
  const auto sampling = draws(kRows);
  SequencePool pool(*model, 2, 64);
  // Sequence 0: the window's rows one step at a time, each row's logits, drawn id and state after it kept.
  pool.prefill(0, prompt, kPrompt);
  std::vector<float> step_logits;
  std::vector<int32_t> step_ids;
  std::vector<std::vector<float>> step_states;
  for (int r = 0; r < kRows; ++r) {
    const SequenceChunk c = pool.chunk(0, std::span<const int32_t>(&window[size_t(r)], 1), kPrompt + r);
    const RowSampling logits_only{};
    const SampledForward l = model->forward_sampled(std::span<const SequenceChunk>(&c, 1),
                                                    std::span<const RowSampling>(&logits_only, 1), pool.pool());
    step_logits.insert(step_logits.end(), l.logits.begin(), l.logits.end());
    if (stateful) step_states.push_back(pool.state(0));
  }
  // The same steps again on a fresh prefix, drawing on the model's sampler.
  pool.prefill(0, prompt, kPrompt);
  for (int r = 0; r < kRows; ++r) {
    const SequenceChunk c = pool.chunk(0, std::span<const int32_t>(&window[size_t(r)], 1), kPrompt + r);
    step_ids.push_back(model->forward_sampled(std::span<const SequenceChunk>(&c, 1),
                                              std::span<const RowSampling>(&sampling[size_t(r)], 1), pool.pool())
                           .ids[0]);
  }
  // Sequence 1: the whole window in one chunk, with snapshots after rows 1 .. kRows - 1.
  pool.prefill(1, prompt, kPrompt);
  std::vector<std::vector<float>> snapshots(size_t(kRows - 1), std::vector<float>(pool.pool().state_floats()));
  std::vector<StateSnapshotTarget> targets;
  for (int r = 1; r < kRows; ++r) targets.push_back({kPrompt + r, snapshots[size_t(r - 1)].data()});
  SequenceChunk c = pool.chunk(1, window, kPrompt, true);
  if (stateful) c.state_snapshots = targets;
  const std::vector<RowSampling> logits_only(static_cast<size_t>(kRows));
  const SampledForward whole =
      model->forward_sampled(std::span<const SequenceChunk>(&c, 1), logits_only, pool.pool());
  ASSERT_EQ(whole.logits.size(), size_t(kRows) * V);
  for (int r = 0; r < kRows; ++r)
    EXPECT_EQ(std::memcmp(whole.logits.data() + size_t(r) * V, step_logits.data() + size_t(r) * V, V * 4), 0)
        << "logits of row " << r;
  if (stateful) {
    for (int r = 1; r < kRows; ++r)
      EXPECT_EQ(snapshots[size_t(r - 1)], step_states[size_t(r - 1)]) << "state after row " << r - 1;
    EXPECT_EQ(pool.state(1), step_states.back()) << "state after the window";
  }
  // Drawn on the model's sampler in one window: the steps' ids (or logits rows where the model does not sample).
  pool.prefill(1, prompt, kPrompt);
  const SampledForward drawn = model->forward_sampled(std::span<const SequenceChunk>(&c, 1), sampling, pool.pool());
  ASSERT_EQ(drawn.ids.size(), size_t(kRows));
  for (int r = 0; r < kRows; ++r) {
    EXPECT_EQ(drawn.ids[size_t(r)], step_ids[size_t(r)]) << "drawn id of row " << r;
    EXPECT_LT(drawn.ids[size_t(r)], config.vocab_size);
  }
}

FS_CONFORMANCE_INSTANCES(VerifyWindow);

}  // namespace
}  // namespace fs::test

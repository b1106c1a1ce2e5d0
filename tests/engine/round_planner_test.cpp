// The round planner: decode rows first (with their draft windows), then prefill chunks in arrival order, each cut at
// the prefill chunk, the prompt's end and the round's row budget; a round with work always plans some. Held decode
// rows (prefill first) wait for a round without prompt work.
#include <gtest/gtest.h>

#include <vector>

#include "engine/scheduler.h"

namespace fs {
namespace {

// A stream with a prompt of `prompt_len`, `generated` ids after it, and K/V computed for `computed` positions.
Stream stream(int prompt_len, int generated, int computed, std::vector<int32_t> draft = {}) {
  Stream s;
  s.prompt_len = prompt_len;
  s.generated = generated;
  s.computed = computed;
  s.tokens.assign(size_t(prompt_len + generated), 1);
  s.draft = std::move(draft);
  return s;
}

struct Planned {
  Stream* stream;
  int begin, count;
  bool samples;
  int drafted;
};

void expect_plan(const std::vector<RoundItem>& got, const std::vector<Planned>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("item " + std::to_string(i));
    EXPECT_EQ(got[i].stream, want[i].stream);
    EXPECT_EQ(got[i].begin, want[i].begin);
    EXPECT_EQ(got[i].count, want[i].count);
    EXPECT_EQ(got[i].samples, want[i].samples);
    EXPECT_EQ(got[i].drafted, want[i].drafted);
  }
}

TEST(RoundPlanner, DecodeRowsComeFirstThenPrefillInArrivalOrder) {
  Stream a = stream(30, 0, 0), b = stream(10, 3, 12), c = stream(7, 0, 0), d = stream(5, 1, 5);
  std::vector<Stream*> streams{&a, &b, &c, &d};
  expect_plan(plan_round(streams, {16}, 100), {{&b, 12, 1, true, 0},
                                             {&d, 5, 1, true, 0},
                                             {&a, 0, 16, false, 0},
                                             {&c, 0, 7, true, 0}});
}

TEST(RoundPlanner, PrefillStopsAtTheRoundBudgetAndTheLastChunkIsCut) {
  Stream a = stream(30, 0, 0), b = stream(30, 0, 0), c = stream(30, 0, 0), d = stream(4, 2, 5);
  std::vector<Stream*> streams{&a, &b, &c, &d};
  // 1 decode row + 16 + 7 = the budget of 24; c gets nothing this round.
  expect_plan(plan_round(streams, {16}, 24), {{&d, 5, 1, true, 0}, {&a, 0, 16, false, 0}, {&b, 0, 7, false, 0}});
}

TEST(RoundPlanner, DecodeRowsAreNeverDroppedForTheBudget) {
  Stream a = stream(4, 1, 4), b = stream(4, 1, 4), c = stream(4, 1, 4), p = stream(20, 0, 0);
  std::vector<Stream*> streams{&p, &a, &b, &c};
  expect_plan(plan_round(streams, {16}, 2), {{&a, 4, 1, true, 0}, {&b, 4, 1, true, 0}, {&c, 4, 1, true, 0}});
}

TEST(RoundPlanner, ARoundWithOnlyPrefillMakesProgressUnderAnyBudget) {
  Stream a = stream(20, 0, 0);
  std::vector<Stream*> streams{&a};
  expect_plan(plan_round(streams, {16}, 0), {{&a, 0, 1, false, 0}});
  expect_plan(plan_round(streams, {16}, 5), {{&a, 0, 5, false, 0}});
}

TEST(RoundPlanner, PrefillContinuesFromComputedAndSamplesAtTheLastToken) {
  Stream a = stream(20, 0, 16);
  std::vector<Stream*> streams{&a};
  expect_plan(plan_round(streams, {16}, 64), {{&a, 16, 4, true, 0}});
}

TEST(RoundPlanner, AResumedStreamStopsItsChunkAtThePromptEnd) {
  // Preempted after 6 generated ids: the prompt is recomputed first, then the generated ids.
  Stream a = stream(10, 6, 0);
  EXPECT_EQ(next_chunk_length(a, {64}), 10);
  std::vector<Stream*> streams{&a};
  expect_plan(plan_round(streams, {64}, 64), {{&a, 0, 10, false, 0}});
  a.computed = 10;
  expect_plan(plan_round(streams, {64}, 64), {{&a, 10, 6, true, 0}});
}

TEST(RoundPlanner, DraftTokensWidenTheDecodeRowIntoAVerifyWindow) {
  Stream a = stream(4, 2, 5, {7, 8, 9}), p = stream(30, 0, 0);
  std::vector<Stream*> streams{&p, &a};
  // 4 rows of verify window, then 16 - 4 = 12 prompt rows.
  expect_plan(plan_round(streams, {16}, 16), {{&a, 5, 4, true, 3}, {&p, 0, 12, false, 0}});
}

TEST(RoundPlanner, StreamsWithoutPendingPositionsAreSkipped) {
  Stream idle = stream(4, 2, 6), a = stream(3, 0, 0);
  std::vector<Stream*> streams{&idle, &a};
  expect_plan(plan_round(streams, {16}, 16), {{&a, 0, 3, true, 0}});
  std::vector<Stream*> none{&idle};
  EXPECT_TRUE(plan_round(none, {16}, 16).empty());
}

TEST(RoundPlanner, HeldDecodeRowsWaitWhilePromptWorkIsLeft) {
  Stream a = stream(30, 0, 0), d = stream(4, 2, 5), e = stream(6, 1, 6);
  std::vector<Stream*> streams{&a, &d, &e};
  EXPECT_TRUE(prompt_work_left(streams));
  expect_plan(plan_round(streams, {16}, 24, true), {{&a, 0, 16, false, 0}});
  // The budget is the prompts' alone then; without holding, the decode rows come first and take from it.
  expect_plan(plan_round(streams, {16}, 24), {{&d, 5, 1, true, 0}, {&e, 6, 1, true, 0}, {&a, 0, 16, false, 0}});
  // With no prompt work left the held decode rows run.
  std::vector<Stream*> decoders{&d, &e};
  EXPECT_FALSE(prompt_work_left(decoders));
  expect_plan(plan_round(decoders, {16}, 24, true), {{&d, 5, 1, true, 0}, {&e, 6, 1, true, 0}});
}

TEST(RoundPlanner, ARecomputedPrefixCountsAsPromptWork) {
  // Preempted after 6 generated ids: its recomputation holds the decode rows too.
  Stream r = stream(10, 6, 0), d = stream(4, 2, 5);
  std::vector<Stream*> streams{&d, &r};
  EXPECT_TRUE(prompt_work_left(streams));
  expect_plan(plan_round(streams, {64}, 64, true), {{&r, 0, 10, false, 0}});
}

TEST(RoundPlanner, NextChunkLength) {
  EXPECT_EQ(next_chunk_length(stream(40, 0, 0), {16}), 16);
  EXPECT_EQ(next_chunk_length(stream(40, 0, 32), {16}), 8);
  EXPECT_EQ(next_chunk_length(stream(40, 5, 44), {16}), 1);  // decoding
  EXPECT_TRUE(decoding(stream(40, 5, 44)));
  EXPECT_FALSE(decoding(stream(40, 0, 39)));  // the prompt's last token is prefill, not decode
}

TEST(RoundPlanner, AlignedPromptChunksEndAtMultiplesOfTheAlignmentOrThePromptEnd) {
  // A 50-position prompt with 16-position alignment: the chunk, the budget and a small prefill chunk are cut back to
  // 16-position ends (or taken up to one); the last chunk ends at the prompt; generated positions are not aligned.
  Stream a = stream(50, 3, 0);
  EXPECT_EQ(aligned_chunk_length(a, 40, 16), 32);
  EXPECT_EQ(aligned_chunk_length(a, 5, 16), 16);
  EXPECT_EQ(aligned_chunk_length(a, 50, 16), 50);
  EXPECT_EQ(aligned_chunk_length(a, 40, 1), 40);
  EXPECT_EQ(next_chunk_length(a, {40, 16}), 32);
  EXPECT_EQ(next_chunk_length(a, {5, 16}), 16);
  std::vector<Stream*> streams{&a};
  expect_plan(plan_round(streams, {40, 16}, 64, false), {{&a, 0, 32, false, 0}});
  expect_plan(plan_round(streams, {5, 16}, 64, false), {{&a, 0, 16, false, 0}});
  expect_plan(plan_round(streams, {64, 16}, 20, false), {{&a, 0, 16, false, 0}});
  a.computed = 16;
  expect_plan(plan_round(streams, {64, 16}, 3, false), {{&a, 16, 16, false, 0}});
  expect_plan(plan_round(streams, {64, 16}, 30, false), {{&a, 16, 16, false, 0}});
  expect_plan(plan_round(streams, {64, 16}, 40, false), {{&a, 16, 34, false, 0}});
  a.computed = 48;
  expect_plan(plan_round(streams, {64, 16}, 64, false), {{&a, 48, 2, false, 0}});
  a.computed = 50;
  expect_plan(plan_round(streams, {2, 16}, 64, false), {{&a, 50, 2, false, 0}});
}

}  // namespace

}  // namespace fs

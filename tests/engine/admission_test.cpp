// Admission decisions: chunk lengths, the pages a stream's next chunk takes, the reserve, and when the head of the
// queue may start; the pool's size and the positions one stream may reach.
#include <gtest/gtest.h>

#include "engine/admission.h"
#include "engine/scheduler.h"

namespace fs {
namespace {

Stream stream(int prompt, int generated, int computed, int pages) {
  Stream s;
  s.prompt_len = prompt;
  s.tokens.assign(size_t(prompt + generated), 1);
  s.generated = generated;
  s.computed = computed;
  s.pages.assign(size_t(pages), 0);
  return s;
}

TEST(Admission, NextChunkIsOneDecodeRowOrPendingPositionsUpToTheChunkAndThePromptEnd) {
  EXPECT_EQ(next_chunk_length(stream(40, 0, 0, 0), {16}), 16);
  EXPECT_EQ(next_chunk_length(stream(40, 0, 32, 2), {16}), 8);
  EXPECT_EQ(next_chunk_length(stream(40, 5, 44, 3), {16}), 1);  // decoding
  // A preempted stream recomputes its prompt and then its reply, never both in one chunk.
  EXPECT_EQ(next_chunk_length(stream(40, 5, 32, 0), {16}), 8);
  EXPECT_EQ(next_chunk_length(stream(40, 5, 40, 0), {16}), 5);
}

TEST(Admission, PagesForTheNextChunkCountOnlyPagesNotHeld) {
  EXPECT_EQ(pages_for_next_chunk(stream(40, 0, 0, 0), {16}, 16), 1);
  EXPECT_EQ(pages_for_next_chunk(stream(40, 0, 0, 0), {64}, 16), 3);
  EXPECT_EQ(pages_for_next_chunk(stream(40, 0, 16, 2), {64}, 16), 1);
  EXPECT_EQ(pages_for_next_chunk(stream(40, 3, 42, 3), {64}, 16), 0);  // position 42 lies in page 2
  EXPECT_EQ(pages_for_next_chunk(stream(40, 9, 48, 3), {64}, 16), 1);  // position 48 opens page 3
  // With prompt chunks aligned to 16 positions a 5-position chunk is taken up to 16: four pages of 4, not two.
  EXPECT_EQ(pages_for_next_chunk(stream(40, 0, 0, 0), {5}, 4), 2);
  EXPECT_EQ(pages_for_next_chunk(stream(40, 0, 0, 0), {5, 16}, 4), 4);
  EXPECT_EQ(pages_to_admit(stream(40, 0, 0, 0), {5, 16}, 4), 4);
  EXPECT_EQ(pages_to_reserve(stream(40, 0, 0, 0), {5, 16}, 4, 256), 4);
}

TEST(Admission, AStreamBackInTheQueueWaitsForAllItsPositions) {
  EXPECT_EQ(pages_to_admit(stream(40, 0, 0, 0), {16}, 16), 1);  // never admitted: its next chunk
  Stream back = stream(40, 30, 0, 0);
  back.admitted = true;
  EXPECT_EQ(pages_to_admit(back, {16}, 16), 5);  // 70 positions known
  back.pages.assign(3, 0);                       // 3 pages adopted from the prompt cache
  EXPECT_EQ(pages_to_admit(back, {16}, 16), 2);
  back.pages.assign(6, 0);
  EXPECT_EQ(pages_to_admit(back, {16}, 16), 0);
}

TEST(Admission, AStreamThatCanGrowReservesAtLeastOnePage) {
  EXPECT_EQ(pages_to_reserve(stream(40, 3, 42, 3), {64}, 16, 256), 1);
  EXPECT_EQ(pages_to_reserve(stream(40, 0, 0, 0), {64}, 16, 256), 3);
  EXPECT_EQ(pages_to_reserve(stream(40, 3, 42, 3), {64}, 16, 48), 0);  // its pages already hold all it may reach
}

TEST(Admission, TheHeadStartsWhileItsChunkFitsBesideTheReserveAndBelowParallel) {
  EXPECT_TRUE(may_admit(0, 4, 0, 0, 5));  // alone it always starts
  EXPECT_TRUE(may_admit(2, 4, 10, 4, 6));
  EXPECT_FALSE(may_admit(2, 4, 10, 4, 7));
  EXPECT_FALSE(may_admit(4, 4, 100, 0, 1));
}

TEST(Admission, PoolPagesAndStreamPositions) {
  EngineOptions o;
  o.parallel = 3;
  o.context = 100;
  o.prompt_cache_pages = 5;
  EXPECT_EQ(kv_pool_pages(o), 3 * 7 + 5);
  EXPECT_EQ(stream_positions(o), 100);
  o.kv_pages = 4;
  EXPECT_EQ(kv_pool_pages(o), 4);
  EXPECT_EQ(stream_positions(o), 64);
}

}  // namespace
}  // namespace fs

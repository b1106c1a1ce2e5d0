// Decode-graph bookkeeping: bucket choice, padding rows onto the reserved page, and a metadata layout fixed per
// bucket with the page tables last.
#include <gtest/gtest.h>

#include "backends/cuda/host/decode_buckets.h"
#include "core/error.h"

namespace fs::cuda {
namespace {

TEST(DecodeBuckets, SmallestPowerOfTwoUpTo64) {
  EXPECT_EQ(decode_bucket(0), 0);
  EXPECT_EQ(decode_bucket(-3), 0);
  EXPECT_EQ(decode_bucket(1), 1);
  EXPECT_EQ(decode_bucket(2), 2);
  EXPECT_EQ(decode_bucket(3), 4);
  EXPECT_EQ(decode_bucket(5), 8);
  EXPECT_EQ(decode_bucket(16), 16);
  EXPECT_EQ(decode_bucket(17), 32);
  EXPECT_EQ(decode_bucket(33), 64);
  EXPECT_EQ(decode_bucket(64), 64);
  EXPECT_EQ(decode_bucket(65), 0);
  for (int rows = 1; rows <= kMaxDecodeBucket; ++rows) {
    const int b = decode_bucket(rows);
    EXPECT_GE(b, rows);
    EXPECT_LT(b / 2, rows);
    EXPECT_GE(decode_bucket_index(b), 0);
    EXPECT_EQ(kDecodeBuckets[decode_bucket_index(b)], b);
  }
  EXPECT_EQ(decode_bucket_index(3), -1);
  EXPECT_EQ(decode_bucket_index(128), -1);
}

PassRows three_rows() {
  PassRows p;
  p.rows = 3;
  p.tokens = {11, 12, 13};
  p.slot = {5 * 16 + 3, 7 * 16 + 0, 2 * 16 + 15};
  p.keys = {4, 17, 48};
  p.table = {0, 1, 3};
  p.logits = {0, 1, 2};
  p.pages = {5, 6, 7, 0, 1, 2};
  p.rope_positions = {3, 3, 3, 16, 16, 16, 47, 47, 47};
  return p;
}

TEST(DecodeBuckets, PaddedRowsWriteOnlyTheReservedPage) {
  PassRows p = three_rows();
  const PassRows before = p;
  pad_decode_rows(p, 8, 99, 16);
  EXPECT_EQ(p.rows, 8);
  ASSERT_EQ(p.tokens.size(), 8u);
  ASSERT_EQ(p.rope_positions.size(), 24u);
  ASSERT_EQ(p.pages.size(), before.pages.size() + 1);
  EXPECT_EQ(p.pages.back(), 99);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(p.tokens[r], before.tokens[r]);
    EXPECT_EQ(p.slot[r], before.slot[r]);
    EXPECT_EQ(p.keys[r], before.keys[r]);
    EXPECT_EQ(p.table[r], before.table[r]);
  }
  for (int r = 3; r < 8; ++r) {
    EXPECT_EQ(p.slot[r], 99 * 16);
    EXPECT_EQ(p.keys[r], 1);
    EXPECT_EQ(p.pages[size_t(p.table[r])], 99);
    EXPECT_EQ(p.rope_positions[size_t(r) * 3], 0);
  }
  ASSERT_EQ(p.tree.size(), 8u);
  ASSERT_EQ(p.parent.size(), 8u);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(p.tree[size_t(r)], 0) << "row " << r << " is not a tree row";
  for (int r = 0; r < 8; ++r) EXPECT_EQ(p.logits[r], r);
}

TEST(DecodeBuckets, PaddingRefusesRoundsItCannotServe) {
  PassRows p = three_rows();
  EXPECT_THROW(pad_decode_rows(p, 2, 99, 16), Error);
  p = three_rows();
  p.logits.pop_back();
  EXPECT_THROW(pad_decode_rows(p, 4, 99, 16), Error);
  p = three_rows();
  EXPECT_THROW(pad_decode_rows(p, 4, -1, 16), Error);
}

TEST(DecodeBuckets, LayoutIsFixedPerBucketWithPagesLast) {
  for (int b : kDecodeBuckets) {
    const MetaLayout m = meta_layout(b, b, 64, 6);
    const size_t B = size_t(b);
    EXPECT_EQ(m.tokens, 0u);
    EXPECT_EQ(m.slot, B);
    EXPECT_EQ(m.keys, 2 * B);
    EXPECT_EQ(m.table, 3 * B);
    EXPECT_EQ(m.tree, 4 * B);
    EXPECT_EQ(m.parent, 5 * B);
    EXPECT_EQ(m.logits, 6 * B);
    EXPECT_EQ(m.sample, 7 * B);
    EXPECT_EQ(m.cos, 7 * B + 6 * B);
    EXPECT_EQ(m.sin, m.cos + 64 * B);
    EXPECT_EQ(m.pages, m.sin + 64 * B);
    EXPECT_EQ(m.words(10), m.pages + 10);
    // Every smaller bucket's tables start no later than the largest one's, so one capacity serves all.
    EXPECT_LE(m.pages, meta_layout(kMaxDecodeBucket, kMaxDecodeBucket, 64, 6).pages);
  }
  const MetaLayout e = meta_layout(7, 2, 32, 6);
  EXPECT_EQ(e.sample, 6u * 7 + 2);
  EXPECT_EQ(e.cos, e.sample + 12);
}

}  // namespace
}  // namespace fs::cuda

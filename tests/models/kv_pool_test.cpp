// The page pool: pages and state slots come and go by reference count, exhaustion is reported, misuse is refused,
// and each page's layers, keys and values occupy their own floats so copies and save/load move exactly them.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "core/error.h"
#include "models/kv_pool.h"

namespace fs {
namespace {

constexpr int kLayers = 3, kHeads = 2, kHeadDim = 4, kPageTokens = 5;

// Fills every float of `page` with a value naming the page, the layer, K or V, and the float's index.
void fill(KvPool& pool, int32_t page) {
  const size_t n = size_t(pool.page_tokens()) * size_t(pool.row_floats());
  for (int l = 0; l < pool.layers(); ++l)
    for (size_t i = 0; i < n; ++i) {
      pool.keys(page, l)[i] = float(page * 100000 + l * 10000 + int(i));
      pool.values(page, l)[i] = -float(page * 100000 + l * 10000 + int(i));
    }
}

TEST(KvPool, PagesComeAndGoByReferenceCount) {
  KvPool pool(kLayers, kHeads, kHeadDim, kPageTokens, 3);
  EXPECT_EQ(pool.pages_total(), 3);
  std::set<int32_t> taken;
  for (int i = 0; i < 3; ++i) {
    auto p = pool.allocate();
    ASSERT_TRUE(p);
    EXPECT_EQ(pool.refcount(*p), 1);
    taken.insert(*p);
  }
  EXPECT_EQ(taken.size(), 3u);
  EXPECT_FALSE(pool.allocate());
  EXPECT_EQ(pool.pages_used(), 3);

  const int32_t shared = *taken.begin();
  pool.retain(shared);
  EXPECT_EQ(pool.refcount(shared), 2);
  pool.release(shared);
  EXPECT_EQ(pool.pages_free(), 0);  // still held once
  pool.release(shared);
  EXPECT_EQ(pool.pages_free(), 1);
  EXPECT_EQ(pool.refcount(shared), 0);
  EXPECT_EQ(pool.allocate(), shared);  // the only free page
}

TEST(KvPool, MisuseIsRefused) {
  KvPool pool(kLayers, kHeads, kHeadDim, kPageTokens, 2);
  const int32_t p = *pool.allocate();
  pool.release(p);
  EXPECT_THROW(pool.release(p), Error);
  EXPECT_THROW(pool.retain(p), Error);
  EXPECT_THROW(pool.release(7), std::out_of_range);
}

TEST(KvPool, LayersKeysAndValuesOfEveryPageAreDisjoint) {
  KvPool pool(kLayers, kHeads, kHeadDim, kPageTokens, 3);
  EXPECT_EQ(pool.row_floats(), kHeads * kHeadDim);
  EXPECT_EQ(pool.page_floats(), size_t(kLayers) * 2 * kPageTokens * kHeads * kHeadDim);
  EXPECT_EQ(KvPool::bytes_per_page(kLayers, kHeads, kHeadDim, kPageTokens), pool.page_floats() * sizeof(float));
  std::vector<int32_t> pages{*pool.allocate(), *pool.allocate(), *pool.allocate()};
  for (int32_t p : pages) fill(pool, p);
  const size_t n = size_t(kPageTokens) * size_t(pool.row_floats());
  for (int32_t p : pages)
    for (int l = 0; l < kLayers; ++l)
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(pool.keys(p, l)[i], float(p * 100000 + l * 10000 + int(i)));
        ASSERT_EQ(pool.values(p, l)[i], -float(p * 100000 + l * 10000 + int(i)));
      }
}

TEST(KvPool, CopyPositionsMovesOnlyTheFirstPositionsOfEveryLayer) {
  KvPool pool(kLayers, kHeads, kHeadDim, kPageTokens, 2);
  const int32_t a = *pool.allocate(), b = *pool.allocate();
  fill(pool, a);
  fill(pool, b);
  constexpr int kCopied = 2;
  pool.copy_positions(a, b, kCopied);
  const size_t row = size_t(pool.row_floats()), n = size_t(kPageTokens) * row;
  for (int l = 0; l < kLayers; ++l)
    for (size_t i = 0; i < n; ++i) {
      const int32_t from = i < kCopied * row ? a : b;
      ASSERT_EQ(pool.keys(b, l)[i], float(from * 100000 + l * 10000 + int(i))) << "layer " << l << " float " << i;
      ASSERT_EQ(pool.values(b, l)[i], -float(from * 100000 + l * 10000 + int(i))) << "layer " << l << " float " << i;
    }
}

TEST(KvPool, SaveAndLoadRoundTripAWholePage) {
  KvPool pool(kLayers, kHeads, kHeadDim, kPageTokens, 2);
  const int32_t a = *pool.allocate(), b = *pool.allocate();
  fill(pool, a);
  std::vector<float> saved(pool.page_floats());
  pool.save_page(a, saved.data());
  pool.load_page(b, saved.data());
  for (int l = 0; l < kLayers; ++l)
    for (size_t i = 0; i < size_t(kPageTokens) * size_t(pool.row_floats()); ++i) {
      ASSERT_EQ(pool.keys(b, l)[i], pool.keys(a, l)[i]);
      ASSERT_EQ(pool.values(b, l)[i], pool.values(a, l)[i]);
    }
}

TEST(KvPool, BooksOnlyPoolKeepsNoStorage) {
  KvPool pool(kLayers, kHeads, kHeadDim, kPageTokens, 4, false);
  EXPECT_FALSE(pool.has_host_storage());
  EXPECT_TRUE(pool.allocate());
  EXPECT_EQ(pool.pages_used(), 1);
}

TEST(KvPool, StateSlotsAreSeparateBlocksAndRefuseMisuse) {
  SequenceMemorySpec spec{1, kHeads, kHeadDim, 6};
  KvPool pool(spec, kPageTokens, 2, 2);
  EXPECT_EQ(pool.state_floats(), 6u);
  EXPECT_EQ(pool.state_slots_total(), 2);
  const int32_t s0 = *pool.allocate_state(), s1 = *pool.allocate_state();
  EXPECT_NE(s0, s1);
  EXPECT_FALSE(pool.allocate_state());
  for (int i = 0; i < 6; ++i) {
    pool.state(s0)[i] = float(i);
    pool.state(s1)[i] = float(-i - 1);
  }
  for (int i = 0; i < 6; ++i) EXPECT_EQ(pool.state(s0)[i], float(i));
  pool.release_state(s0);
  EXPECT_EQ(pool.state_slots_free(), 1);
  EXPECT_THROW(pool.state(s0), Error);
  EXPECT_THROW(pool.release_state(s0), Error);
  EXPECT_EQ(pool.allocate_state(), s0);
}

TEST(KvPool, SpecWithoutStateGivesNoSlots) {
  SequenceMemorySpec spec{kLayers, kHeads, kHeadDim, 0};
  KvPool pool(spec, kPageTokens, 2, 4);
  EXPECT_EQ(pool.state_slots_total(), 0);
  EXPECT_FALSE(pool.allocate_state());
}

}  // namespace
}  // namespace fs

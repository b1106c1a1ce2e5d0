// OldestFirst: one walk fills a batch of the oldest passing nodes; offers keep the order; a walk that left nodes out
// makes offers past the batch wait for the next walk.
#include "engine/oldest_first.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace fs::test {
namespace {

struct Item {
  uint64_t last_used = 0;
  bool passes = true;
};

class OldestFirstTest : public ::testing::Test {
 protected:
  // `n` items, item i used at time 10 · (n − i): the last is the oldest.
  void make(int n) {
    items.assign(static_cast<size_t>(n), Item{});
    for (int i = 0; i < n; ++i) items[size_t(i)].last_used = uint64_t(10 * (n - i));
  }
  Item* next() {
    ++calls;
    return order.next([](const Item* it) { return it->passes; },
                      [&](auto f) {
                        ++walks;
                        for (auto& it : items) f(&it);
                      });
  }
  std::vector<Item> items;
  OldestFirst<Item> order;
  int walks = 0, calls = 0;
};

TEST_F(OldestFirstTest, HandsOutTheOldestFirstAndWalksOncePerBatch) {
  const int n = int(OldestFirst<Item>::kBatch) + 10;
  make(n);
  items[size_t(n - 2)].passes = false;  // the second oldest is skipped
  std::vector<uint64_t> seen;
  for (Item* it = next(); it; it = next()) {
    seen.push_back(it->last_used);
    it->passes = false;  // taken
  }
  ASSERT_EQ(seen.size(), size_t(n - 1));
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_LT(seen[i - 1], seen[i]);
  EXPECT_EQ(seen.front(), 10u);
  EXPECT_EQ(walks, 3);  // a full batch, the rest, and the walk that finds none
}

TEST_F(OldestFirstTest, AnOfferTakesItsPlaceAmongTheBatch) {
  make(5);
  items[2].passes = false;
  ASSERT_EQ(next(), &items[4]);  // the walk found 4: the batch holds them all
  items[2].passes = true;
  order.offer(&items[2]);
  EXPECT_EQ(next(), &items[3]);
  EXPECT_EQ(next(), &items[2]);
  Item late{1000, true};  // newer than every entry: it goes last when the walk left nothing out
  order.offer(&late);
  EXPECT_EQ(next(), &items[1]);
  EXPECT_EQ(next(), &items[0]);
  EXPECT_EQ(next(), &late);
  EXPECT_EQ(walks, 1);
}

TEST_F(OldestFirstTest, AnOfferPastAPartialBatchWaitsForTheNextWalk) {
  const int n = int(OldestFirst<Item>::kBatch) + 2;
  make(n);
  items[0].passes = false;  // the newest; of the rest the walk leaves item 1 out
  ASSERT_EQ(next(), &items[size_t(n - 1)]);
  Item late{100000, true};
  order.offer(&late);  // past the batch's newest, and the walk left item 1 out: not taken into the batch
  for (auto& it : items) it.passes = false;
  items[1].passes = true;
  EXPECT_EQ(next(), &items[1]);  // the batch ran dry, so this came from a second walk
  EXPECT_EQ(walks, 2);
}

TEST_F(OldestFirstTest, ForgottenAndClearedEntriesAreGone) {
  make(4);
  ASSERT_EQ(next(), &items[3]);
  order.forget(&items[2]);
  items[2].passes = true;
  EXPECT_EQ(next(), &items[1]);  // item 2 was forgotten although it still passes
  order.clear();
  EXPECT_EQ(next(), &items[3]);  // a fresh walk: every passing item again, oldest first
  EXPECT_EQ(walks, 2);
}

}  // namespace
}  // namespace fs::test

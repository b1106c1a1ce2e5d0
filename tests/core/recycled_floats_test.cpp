// Round buffers handed back: a large buffer's storage comes back to the next take of its size or less; small ones
// and buffers beyond the few kept go back to the allocator.
#include <gtest/gtest.h>

#include "core/recycled_floats.h"

namespace fs::test {
namespace {

constexpr size_t kLarge = size_t{1} << 22;  // floats

TEST(RecycledFloats, ALargeBufferComesBackToTheNextTake) {
  std::vector<float> a = take_floats(kLarge);
  ASSERT_EQ(a.size(), kLarge);
  const float* storage = a.data();
  recycle_floats(std::move(a));
  std::vector<float> b = take_floats(kLarge / 2);
  EXPECT_EQ(b.data(), storage);
  EXPECT_EQ(b.size(), kLarge / 2);
  std::vector<float> c = take_floats(kLarge);  // nothing kept now: fresh storage
  EXPECT_NE(c.data(), storage);
  EXPECT_EQ(c.size(), kLarge);
  recycle_floats(std::move(b));
  recycle_floats(std::move(c));
}

TEST(RecycledFloats, SmallBuffersAndOnlyAFewLargeOnesAreKept) {
  std::vector<float> small = take_floats(16);
  recycle_floats(std::move(small));
  EXPECT_EQ(take_floats(16).size(), 16u);
  std::vector<std::vector<float>> many;
  for (int i = 0; i < 4; ++i) many.push_back(take_floats(kLarge + size_t(i)));
  std::vector<const float*> storage;
  for (auto& v : many) storage.push_back(v.data());
  for (auto& v : many) recycle_floats(std::move(v));
  // The two largest are kept, largest first; the others went back to the allocator.
  std::vector<float> first = take_floats(kLarge), second = take_floats(kLarge);
  EXPECT_EQ(first.data(), storage[3]);
  EXPECT_EQ(second.data(), storage[2]);
  std::vector<float> third = take_floats(kLarge);
  EXPECT_NE(third.data(), first.data());
  EXPECT_NE(third.data(), second.data());
}

}  // namespace
}  // namespace fs::test

// The memory budget sums its parts and refuses what cannot fit, with the numbers.
#include <gtest/gtest.h>

#include "budget_config.h"
#include "core/error.h"
#include "engine/memory_budget.h"
#include "models/kv_pool.h"

namespace fs {
namespace {

TEST(MemoryBudget, KvLineGrowsWithStreamsAndContext) {
  EngineOptions o;
  o.parallel = 2;
  o.context = 1024;
  auto small = cpu_budget(test::small_budget_config(), 1 << 20, o, size_t(64) << 30);
  o.parallel = 8;
  auto large = cpu_budget(test::small_budget_config(), 1 << 20, o, size_t(64) << 30);
  // 4 layers × K+V × 2 heads × 64 dims × 4 bytes = 4 KiB per position.
  EXPECT_EQ(large.lines[1].bytes - small.lines[1].bytes, size_t(6) * 1024 * 4096);
  EXPECT_TRUE(large.fits());
  EXPECT_NO_THROW(large.require());
  EXPECT_NE(large.report().find("total"), std::string::npos);
}

TEST(MemoryBudget, RefusesWithTheNumbers) {
  EngineOptions o;
  o.parallel = 8;
  o.context = 32768;
  auto b = cpu_budget(test::small_budget_config(), size_t(1) << 30, o, size_t(2) << 30);
  EXPECT_FALSE(b.fits());
  try {
    b.require();
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("short by"), std::string::npos) << m;
    EXPECT_NE(m.find("8 streams of 32768 positions need 1.00 GiB"), std::string::npos) << m;
  }
}

TEST(MemoryBudget, KvPagesThatFitFillWhatTheOtherLinesLeave) {
  EngineOptions o;
  o.parallel = 16;
  o.context = 4096;
  o.prompt_cache_pages = 10;
  const size_t available = size_t(1) << 30;
  const int pages = kv_pages_that_fit(test::small_budget_config(), size_t(100) << 20, o, available);
  ASSERT_GT(pages, 0);
  o.kv_pages = pages;
  EXPECT_TRUE(cpu_budget(test::small_budget_config(), size_t(100) << 20, o, available).fits());
  o.kv_pages = pages + 1;
  auto over = cpu_budget(test::small_budget_config(), size_t(100) << 20, o, available);
  EXPECT_FALSE(over.fits());
  EXPECT_NE(over.report().find("a pool of " + std::to_string(pages + 1) + " pages"), std::string::npos);
  EXPECT_EQ(kv_pages_that_fit(test::small_budget_config(), size_t(2) << 30, o, available), 0);
}

TEST(ServingPool, HoldsEveryStreamWhenMemoryAllowsElseShrinksButKeepsOneFullStream) {
  const ModelConfig c = test::small_budget_config();
  EngineOptions o;
  o.parallel = 8;
  o.context = 1024;
  o.prompt_cache_pages = 10;
  const int per_stream = 1024 / o.kv_page_tokens;
  EXPECT_EQ(kv_pool_pages_for_serving(c, 1 << 20, o, size_t(64) << 30), 8 * per_stream + 10);
  const size_t page = KvPool::bytes_per_page(c.num_layers, c.num_kv_heads, c.head_dim, o.kv_page_tokens);
  EngineOptions one_page = o;
  one_page.kv_pages = 1;
  const size_t others = cpu_budget(c, 1 << 20, one_page, 0).total() - page;
  // Memory for four streams' pages: the pool takes half of it.
  EXPECT_EQ(kv_pool_pages_for_serving(c, 1 << 20, o, others + 4 * size_t(per_stream) * page), 2 * per_stream);
  EXPECT_EQ(kv_pool_pages_for_serving(c, 1 << 20, o, 1 << 20), per_stream);
}

}  // namespace
}  // namespace fs

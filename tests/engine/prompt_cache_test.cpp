// The prompt cache: resumed == fresh bit for bit after evictions, from the host tier, with streams sharing a prefix
// at once; keys that differ never share; no page leaks when idle.
#include <gtest/gtest.h>

#include <random>

#include "engine_runner.h"
#include "engine/prompt_cache.h"
#include "io/safetensors.h"
#include "models/kv_pool.h"
#include "models/model.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

// Keys of prefix number `prefix`, n of them, shared with no other prefix.
std::vector<uint64_t> prefix_keys(int prefix, int n) {
  std::vector<uint64_t> k(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) k[size_t(i)] = uint64_t(prefix) * 1000 + uint64_t(i);
  return k;
}

// A cache used without an engine, its pool as big as its device share (pages of 16 positions).
struct DirectCache {
  DirectCache(const ModelConfig& c, Model& model, int pages, int host_pages)
      : pool(c.num_layers, c.num_kv_heads, c.head_dim, 16, pages), cache(pool, model, pages, host_pages) {}
  // Inserts the keys on fresh pages, then gives the pages to the cache alone.
  void keep(const std::vector<uint64_t>& k) {
    std::vector<int32_t> pages;
    for (size_t i = 0; i < k.size(); i += 16) pages.push_back(*pool.allocate());
    EXPECT_EQ(cache.insert(k, int(k.size()), pages), int(k.size()));
    for (int32_t p : pages) pool.release(p);
  }
  // Positions a lookup adopts (its pages given back at once).
  int cached(const std::vector<uint64_t>& k) {
    auto hit = cache.lookup(k, int(k.size()));
    for (int32_t p : hit.pages) pool.release(p);
    return hit.positions;
  }
  KvPool pool;
  PromptCache cache;
};

class PromptCacheTest : public FortuneDemoTest {
 protected:

  std::vector<int32_t> tokens(int n, int seed) {
    std::mt19937 rng{static_cast<uint32_t>(seed)};
    std::uniform_int_distribution<int32_t> d(0, config.vocab_size - 1);
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = d(rng);
    return v;
  }

  static std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  GenerationRequest request(const std::vector<int32_t>& prompt, bool seeded = false) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = 8;
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 3;
    r.sampling.temperature = seeded ? 0.8f : 0.0f;
    r.sampling.seed = 42;
    return r;
  }

  EngineOptions options(int cache_pages, int host_pages = 0, int parallel = 4) {
    EngineOptions o;
    o.parallel = parallel;
    o.context = 256;
    o.prefill_chunk = 64;
    o.round_tokens = 96;
    o.prompt_cache_pages = cache_pages;
    o.prompt_cache_host_pages = host_pages;
    return o;
  }

  std::vector<SampledToken> fresh(const GenerationRequest& r) {
    Engine e(*model, options(0));
    EngineRunner run(e);
    auto c = run.submit(r);
    run.wait_all();
    return c->tokens;
  }

  static void expect_idle_accounting(Engine& e) {
    auto s = e.stats();
    EXPECT_EQ(s.kv_pages_used, s.prompt_cache.device_pages);
  }

};

TEST_F(PromptCacheTest, SeveralStreamsShareOnePrefixAtOnce) {
  auto system = tokens(45, 3);
  Engine e(*model, options(64, 0, 6));
  EngineRunner run(e);
  run.submit(request(cat(system, tokens(3, 4))));
  run.wait_all();
  std::vector<GenerationRequest> reqs;
  std::vector<std::shared_ptr<Collected>> got;
  for (int i = 0; i < 6; ++i) reqs.push_back(request(cat(system, tokens(5 + i, 10 + i)), i % 2 == 1));
  for (auto& r : reqs) got.push_back(run.submit(r));
  run.wait_all();
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i]->result.cached_tokens, 45);
    EXPECT_TRUE(same_bits(got[i]->tokens, fresh(reqs[i]))) << i;
  }
  expect_idle_accounting(e);
}

TEST_F(PromptCacheTest, EvictionsKeepResultsExactAndAccountingRight) {
  Engine e(*model, options(6));
  EngineRunner run(e);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(tokens(40, 50 + i));
  for (auto& p : prompts) run.submit(request(p));
  run.wait_all();
  auto s = e.stats();
  EXPECT_GT(s.prompt_cache.evictions, 0u);
  EXPECT_LE(s.prompt_cache.device_pages, 6);
  expect_idle_accounting(e);
  auto again = cat(prompts.back(), tokens(4, 99));
  auto c = run.submit(request(again));
  run.wait_all();
  EXPECT_GT(c->result.cached_tokens, 0);
  EXPECT_TRUE(same_bits(c->tokens, fresh(request(again))));
  expect_idle_accounting(e);
}

TEST_F(PromptCacheTest, HostTierBringsPagesBack) {
  Engine e(*model, options(4, 64));
  EngineRunner run(e);
  auto first = tokens(40, 70);
  run.submit(request(first));
  run.wait_all();
  for (int i = 0; i < 4; ++i) run.submit(request(tokens(40, 80 + i)));  // pushes `first` to the host tier
  run.wait_all();
  auto again = cat(first, tokens(6, 90));
  auto c = run.submit(request(again, true));
  run.wait_all();
  auto s = e.stats();
  EXPECT_GT(s.prompt_cache.host_restores, 0u);
  EXPECT_EQ(c->result.cached_tokens, 40);
  EXPECT_TRUE(same_bits(c->tokens, fresh(request(again, true))));
  expect_idle_accounting(e);
}

TEST_F(PromptCacheTest, DifferentKeysNeverShareAPrefix) {
  auto prompt = tokens(40, 5);
  Engine e(*model, options(64));
  EngineRunner run(e);
  auto r1 = request(prompt);
  r1.cache_keys.assign(prompt.begin(), prompt.end());
  r1.cache_keys[3] = (1ull << 63) | 1;  // as if token 3 were part of one image
  run.submit(r1);
  run.wait_all();
  auto r2 = r1;
  r2.cache_keys[3] = (1ull << 63) | 2;  // another image, same ids
  auto c = run.submit(r2);
  run.wait_all();
  EXPECT_EQ(c->result.cached_tokens, 3);
}

TEST_F(PromptCacheTest, OffWhenBudgetIsZero) {
  Engine e(*model, options(0));
  EngineRunner run(e);
  auto p = tokens(40, 6);
  run.submit(request(p));
  run.wait_all();
  auto c = run.submit(request(p));
  run.wait_all();
  EXPECT_EQ(c->result.cached_tokens, 0);
  EXPECT_EQ(e.stats().kv_pages_used, 0);
}

TEST_F(PromptCacheTest, KeepWithNothingEvictableFailsCleanly) {
  KvPool pool(config.num_layers, config.num_kv_heads, config.head_dim, 16, 8);
  PromptCache cache(pool, *model, 2, 0);
  std::vector<uint64_t> a(32), b(32);
  for (size_t i = 0; i < 32; ++i) {
    a[i] = i;
    b[i] = 1000 + i;
  }
  std::vector<int32_t> pa{*pool.allocate(), *pool.allocate()}, pb{*pool.allocate(), *pool.allocate()};
  EXPECT_EQ(cache.insert(a, 32, pa), 32);  // the budget is full and the stream still holds both pages
  EXPECT_EQ(cache.insert(b, 32, pb), 0);   // nothing can be evicted: the keep is refused
  EXPECT_EQ(cache.stats().device_pages, 2);
  for (int32_t p : pa) pool.release(p);    // the first stream ends: its pages are now the cache's alone
  EXPECT_EQ(cache.insert(b, 32, pb), 32);
  EXPECT_EQ(cache.stats().device_pages, 2);
  for (int32_t p : pb) pool.release(p);
  EXPECT_EQ(pool.pages_used(), 2);
  auto hit = cache.lookup(b, 31);
  EXPECT_EQ(hit.positions, 31);
  for (int32_t p : hit.pages) pool.release(p);
  EXPECT_EQ(pool.pages_used(), 2);
}

// Evictions take the least recently used prefix first, through more evictions than one walk of the tree collects:
// a prefix looked up since stays, and a parent page whose child has gone is next when it is the oldest.
TEST_F(PromptCacheTest, EvictionTakesTheLeastRecentlyUsedPageFirst) {
  constexpr int kPrefixes = 300;
  DirectCache d(config, *model, kPrefixes + 2, 0);
  const std::vector<uint64_t> two_pages = prefix_keys(kPrefixes, 32);
  d.keep(two_pages);  // the oldest: its second page, then its first
  for (int i = 0; i < kPrefixes; ++i) d.keep(prefix_keys(i, 16));
  EXPECT_EQ(d.cached(prefix_keys(0, 16)), 16);  // prefixes 0 and 1 become the most recent
  EXPECT_EQ(d.cached(prefix_keys(1, 16)), 16);
  ASSERT_TRUE(d.cache.evict_one());
  ASSERT_TRUE(d.cache.evict_one());
  EXPECT_EQ(d.cache.stats().device_pages, kPrefixes);
  EXPECT_EQ(d.cached(two_pages), 0);  // both its pages went first
  for (int i = 0; i < kPrefixes - 2; ++i) ASSERT_TRUE(d.cache.evict_one());
  EXPECT_EQ(d.cache.stats().device_pages, 2);
  EXPECT_EQ(d.cached(two_pages), 0);
  EXPECT_EQ(d.cached(prefix_keys(2, 16)), 0);
  EXPECT_EQ(d.cached(prefix_keys(kPrefixes - 1, 16)), 0);
  EXPECT_EQ(d.cached(prefix_keys(0, 16)), 16);
  EXPECT_EQ(d.cached(prefix_keys(1, 16)), 16);
  EXPECT_EQ(d.pool.pages_used(), 2);
}

// Host-tier drops take the least recently used leaf first, through more drops than one walk of the tree collects: a
// parent whose child was dropped is next when it is the oldest, and the newest prefixes stay.
TEST_F(PromptCacheTest, HostTierDropsTheLeastRecentlyUsedLeafFirst) {
  constexpr int kPrefixes = 300, kHost = 150;
  DirectCache d(config, *model, kPrefixes + 2, kHost);
  const std::vector<uint64_t> two_pages = prefix_keys(kPrefixes, 32);
  d.keep(two_pages);  // the oldest: its second page, then its first
  for (int i = 0; i < kPrefixes; ++i) d.keep(prefix_keys(i, 16));
  // The first kHost evictions fill the host tier (both pages of two_pages, prefixes 0 … kHost − 3); the next two
  // drop two_pages' second page, then its first, now a leaf and the oldest.
  for (int i = 0; i < kHost + 2; ++i) ASSERT_TRUE(d.cache.evict_one());
  EXPECT_EQ(d.cache.stats().host_pages, kHost);
  EXPECT_EQ(d.cached(two_pages), 0);
  EXPECT_EQ(d.cached(prefix_keys(0, 16)), 16);  // back on the device, and the most recent
  // The rest go to the host tier, the oldest leaves dropped for them: 150 more drops, past one walk's batch.
  while (d.cache.stats().device_pages > 0) ASSERT_TRUE(d.cache.evict_one());
  EXPECT_EQ(d.cache.stats().host_pages, kHost);
  EXPECT_EQ(d.cached(prefix_keys(0, 16)), 16);
  EXPECT_EQ(d.cached(prefix_keys(1, 16)), 0);
  EXPECT_EQ(d.cached(prefix_keys(kPrefixes - kHost, 16)), 0);
  EXPECT_EQ(d.cached(prefix_keys(kPrefixes - kHost + 1, 16)), 16);
  EXPECT_EQ(d.cached(prefix_keys(kPrefixes - 1, 16)), 16);
}

}  // namespace
}  // namespace fs::test

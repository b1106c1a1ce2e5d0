// The prompt cache on a hybrid model (tiny-qwen3.5): a shared prefix resumes from the deepest recurrent-state
// snapshot and recomputes the rest, bit for bit equal to a fresh run with the cache off; snapshots travel through
// eviction and the host tier with their pages, and a preempted stream parks its prefix with its state.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/prompt_cache.h"
#include "engine/state_snapshots.h"
#include "engine_runner.h"
#include "io/safetensors.h"
#include "models/kv_pool.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

class Qwen35PromptCache : public TinyQwen35Test {
 protected:
  std::vector<int32_t> tokens(int n, int seed) const {
    std::mt19937 rng{uint32_t(seed)};
    std::uniform_int_distribution<int32_t> d(0, config.vocab_size - 1);
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = d(rng);
    return v;
  }

  static std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  static GenerationRequest request(const std::vector<int32_t>& prompt, bool seeded = false) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = 8;
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 3;
    r.sampling.temperature = seeded ? 0.8f : 0.0f;
    r.sampling.seed = 42;
    return r;
  }

  static EngineOptions options(int cache_pages, int host_pages = 0, int parallel = 1, int stride = 16) {
    EngineOptions o;
    o.parallel = parallel;
    o.context = 256;
    o.prefill_chunk = 24;  // chunks cross snapshot positions: snapshots are taken inside them
    o.round_tokens = 64;
    o.prompt_cache_pages = cache_pages;
    o.prompt_cache_host_pages = host_pages;
    o.prompt_cache_state_stride = stride;
    return o;
  }

  // The same request alone with the prompt cache off.
  std::vector<SampledToken> fresh(const GenerationRequest& r) { return run_solo(*model, r); }

  static void expect_idle_accounting(Engine& e) {
    const EngineStats s = e.stats();
    EXPECT_EQ(s.kv_pages_used, s.prompt_cache.device_pages);
  }

};

// A model with aligned prompt chunks takes snapshots only where the stride and its alignment both fall.
TEST_F(Qwen35PromptCache, SnapshotStrideIsAMultipleOfThePromptAlignment) {
  const SequenceMemorySpec spec = model->memory_spec();
  EXPECT_EQ(state_snapshot_stride(options(64), spec), 16);
  EXPECT_EQ(state_snapshot_stride(options(64), spec, 16), 16);
  EXPECT_EQ(state_snapshot_stride(options(64), spec, 24), 48);
  const int every = state_snapshot_stride(options(64, 0, 1, 0), spec);
  const int aligned = state_snapshot_stride(options(64, 0, 1, 0), spec, 24);
  ASSERT_GT(every, 0);
  EXPECT_EQ(aligned % every, 0);
  EXPECT_EQ(aligned % 24, 0);
  EXPECT_LE(aligned, every * 24);
}

TEST_F(Qwen35PromptCache, SharedPrefixResumesFromTheDeepestSnapshotAsFresh) {
  for (int stride : {16, 0}) {
    const int every = state_snapshot_stride(options(64, 0, 1, stride), model->memory_spec());
    for (int shared_len : {5, 16, 17, 47, 48, 50, 100}) {
      SCOPED_TRACE("stride " + std::to_string(every) + ", shared prefix " + std::to_string(shared_len));
      auto prefix = tokens(shared_len, shared_len);
      auto first = cat(prefix, tokens(9, 100 + shared_len));
      auto second = cat(prefix, tokens(12, 200 + shared_len));
      Engine e(*model, options(64, 0, 1, stride));
      EngineRunner run(e);
      run.submit(request(first));
      run.wait_all();
      auto c = run.submit(request(second, true));
      run.wait_all();
      EXPECT_EQ(c->result.cached_tokens, shared_len / every * every);
      EXPECT_TRUE(same_bits(c->tokens, fresh(request(second, true))));
      EXPECT_GT(e.stats().prompt_cache.state_snapshots, 0);
      expect_idle_accounting(e);
    }
  }
}

TEST_F(Qwen35PromptCache, MultiTurnResumesFromTheStateWhereTheReplyEnded) {
  auto turn1 = tokens(40, 1);
  Engine e(*model, options(64));
  EngineRunner run(e);
  auto a = run.submit(request(turn1));
  run.wait_all();
  std::vector<int32_t> reply;
  for (const auto& t : a->tokens) reply.push_back(t.id);
  auto turn2 = cat(cat(turn1, reply), tokens(10, 2));
  run.submit(request(tokens(30, 5)));  // another conversation between the turns takes the one state slot
  run.wait_all();
  auto b = run.submit(request(turn2));
  run.wait_all();
  // Turn 1 ended with its state after every computed position (prompt and all but the last reply token).
  EXPECT_EQ(b->result.cached_tokens, int(turn1.size() + reply.size()) - 1);
  EXPECT_TRUE(same_bits(b->tokens, fresh(request(turn2))));
  std::vector<int32_t> reply2;
  for (const auto& t : b->tokens) reply2.push_back(t.id);
  auto turn3 = cat(cat(turn2, reply2), tokens(7, 3));
  auto c = run.submit(request(turn3, true));
  run.wait_all();
  EXPECT_EQ(c->result.cached_tokens, int(turn2.size() + reply2.size()) - 1);
  EXPECT_TRUE(same_bits(c->tokens, fresh(request(turn3, true))));
  expect_idle_accounting(e);
}

TEST_F(Qwen35PromptCache, SeveralStreamsResumeOnePrefixAtOnce) {
  auto system = tokens(45, 3);
  Engine e(*model, options(96, 0, 6));
  EngineRunner run(e);
  run.submit(request(cat(system, tokens(3, 4))));
  run.wait_all();
  std::vector<GenerationRequest> reqs;
  std::vector<std::shared_ptr<Collected>> got;
  for (int i = 0; i < 6; ++i) reqs.push_back(request(cat(system, tokens(5 + i, 10 + i)), i % 2 == 1));
  for (auto& r : reqs) got.push_back(run.submit(r));
  run.wait_all();
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i]->result.cached_tokens, 45 / 16 * 16);
    EXPECT_TRUE(same_bits(got[i]->tokens, fresh(reqs[i]))) << i;
  }
  expect_idle_accounting(e);
}

TEST_F(Qwen35PromptCache, EvictionFreesSnapshotPagesAndKeepsResultsExact) {
  constexpr int kBudget = 15;
  Engine e(*model, options(kBudget));
  EngineRunner run(e);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(tokens(40, 50 + i));
  for (auto& p : prompts) run.submit(request(p));
  run.wait_all();
  const EngineStats s = e.stats();
  EXPECT_GT(s.prompt_cache.evictions, 0u);
  EXPECT_LE(s.prompt_cache.device_pages, kBudget);
  EXPECT_GT(s.prompt_cache.state_snapshots, 0);
  expect_idle_accounting(e);
  auto again = cat(prompts.back(), tokens(4, 99));
  auto c = run.submit(request(again));
  run.wait_all();
  EXPECT_GT(c->result.cached_tokens, 0);
  EXPECT_TRUE(same_bits(c->tokens, fresh(request(again))));
  expect_idle_accounting(e);
}

TEST_F(Qwen35PromptCache, HostTierCarriesSnapshotsBack) {
  Engine e(*model, options(12, 64));
  EngineRunner run(e);
  auto first = tokens(40, 70);
  run.submit(request(first));
  run.wait_all();
  for (int i = 0; i < 4; ++i) run.submit(request(tokens(40, 80 + i)));  // pushes `first` to the host tier
  run.wait_all();
  EXPECT_GT(e.stats().prompt_cache.host_pages, 0);
  auto again = cat(first, tokens(6, 90));
  auto c = run.submit(request(again, true));
  run.wait_all();
  const EngineStats s = e.stats();
  EXPECT_GT(s.prompt_cache.host_restores, 0u);
  EXPECT_EQ(c->result.cached_tokens, 40 / 16 * 16);
  EXPECT_TRUE(same_bits(c->tokens, fresh(request(again, true))));
  expect_idle_accounting(e);
}

TEST_F(Qwen35PromptCache, PreemptionWithTheCacheOnKeepsBothRepliesExact) {
  auto a = request(tokens(60, 11));
  auto b = request(tokens(50, 12), true);
  a.max_tokens = b.max_tokens = 40;
  EngineOptions o = options(10, 64, 2);
  o.kv_pages = 10;  // a needs 7 pages and b 6 at their ends: b is preempted on the way
  Engine e(*model, o);
  EngineRunner run(e);
  auto got_a = run.submit(a);
  auto got_b = run.submit(b);
  run.wait_all();
  const EngineStats s = e.stats();
  EXPECT_GT(s.preemptions, 0u);
  EXPECT_EQ(got_b->result.cached_tokens, 0);  // its own prefix is not a prompt-cache hit
  EXPECT_TRUE(same_bits(got_a->tokens, fresh(a)));
  EXPECT_TRUE(same_bits(got_b->tokens, fresh(b)));
  expect_idle_accounting(e);
}

// The preempted stream parks its prefix, and its state on the host tier (the pool has no room for it), and resumes
// from there once a has finished: it computes fewer rows than with the cache off, and both replies equal fresh runs.
TEST_F(Qwen35PromptCache, APreemptedStreamResumesFromItsParkedState) {
  auto a = request(tokens(60, 11));
  auto b = request(tokens(50, 12), true);
  a.max_tokens = 22;
  b.max_tokens = 40;
  EngineStats with_cache, without;
  for (int cache_pages : {64, 0}) {
    EngineOptions o = options(cache_pages, cache_pages > 0 ? 64 : 0, 2, 0);
    o.kv_pages = 10;  // a needs 6 pages at its end, b 6: b is preempted after 70 positions
    Engine e(*model, o);
    EngineRunner run(e);
    auto got_a = run.submit(a);
    auto got_b = run.submit(b);
    run.wait_all();
    EXPECT_TRUE(same_bits(got_a->tokens, fresh(a)));
    EXPECT_TRUE(same_bits(got_b->tokens, fresh(b)));
    (cache_pages > 0 ? with_cache : without) = e.stats();
  }
  EXPECT_GT(with_cache.preemptions, 0u);
  EXPECT_GT(with_cache.prompt_cache.host_restores, 0u);
  EXPECT_LT(with_cache.rows, without.rows);
}

// A state kept at a node whose child has already gone to the host tier goes there too when the device has no room.
TEST_F(Qwen35PromptCache, AStateWithNoRoomOnTheDeviceJoinsItsNodesChildOnTheHostTier) {
  const SequenceMemorySpec spec = model->memory_spec();
  const int per_snapshot = pages_per_state_snapshot(spec, 16);
  KvPool pool(spec, 16, 8, 1);
  PromptCache cache(pool, *model, 2, 64);  // two pages: the prefix's, but never a snapshot beside them
  std::vector<uint64_t> keys(32);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = 900 + i;
  std::vector<int32_t> pages{*pool.allocate(), *pool.allocate()};
  EXPECT_EQ(cache.insert(keys, 32, pages), 32);
  for (int32_t p : pages) pool.release(p);
  ASSERT_TRUE(cache.evict_one());  // the second page goes to the host tier
  EXPECT_EQ(cache.stats().host_pages, 1);
  std::vector<float> state(spec.state_floats, 0.25f);
  EXPECT_TRUE(cache.keep_state(keys, 16, state.data()));
  EXPECT_EQ(cache.stats().state_snapshots, 1);
  EXPECT_EQ(cache.stats().host_pages, 2 + per_snapshot);
  EXPECT_EQ(cache.stats().device_pages, 0);
  EXPECT_EQ(pool.pages_used(), 0);
}

TEST_F(Qwen35PromptCache, SnapshotBitsSurviveTheHostTierAndEvictionFreesTheirPages) {
  const SequenceMemorySpec spec = model->memory_spec();
  KvPool pool(spec, 16, 32, 1);
  const int per_snapshot = pages_per_state_snapshot(spec, 16);
  PromptCache cache(pool, *model, 1 + per_snapshot, 64);
  ASSERT_EQ(cache.pages_per_snapshot(), per_snapshot);
  std::vector<uint64_t> a(20), b(20);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = i;
    b[i] = 500 + i;
  }
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> state(spec.state_floats);
  for (float& x : state) x = d(rng);
  std::vector<int32_t> pa{*pool.allocate()}, pb{*pool.allocate()};
  EXPECT_EQ(cache.insert(a, 16, pa, state.data()), 16);
  pool.release(pa[0]);
  EXPECT_EQ(cache.stats().device_pages, 1 + per_snapshot);
  EXPECT_EQ(pool.pages_used(), 1 + per_snapshot + 1);
  EXPECT_EQ(cache.insert(b, 16, pb), 16);  // no room beside a's page and snapshot: a moves to the host tier
  pool.release(pb[0]);
  EXPECT_EQ(cache.stats().host_pages, 1 + per_snapshot);
  EXPECT_EQ(pool.pages_used(), 1);
  auto hit = cache.lookup(a, 19);
  EXPECT_EQ(hit.positions, 16);
  ASSERT_EQ(int(hit.state_pages.size()), per_snapshot);
  std::vector<float> got(state.size());
  model->read_state_pages(pool, hit.state_pages, got.data());
  EXPECT_EQ(std::memcmp(got.data(), state.data(), state.size() * sizeof(float)), 0);
  for (int32_t p : hit.pages) pool.release(p);
  for (int32_t p : hit.state_pages) pool.release(p);
  EXPECT_EQ(cache.stats().state_snapshots, 1);
  EXPECT_EQ(pool.pages_used(), cache.stats().device_pages);
  // b's page has no snapshot: nothing there to resume from.
  auto miss = cache.lookup(b, 19);
  EXPECT_EQ(miss.positions, 0);
  EXPECT_TRUE(miss.pages.empty());
  EXPECT_EQ(pool.pages_used(), cache.stats().device_pages);
}

// A lookup that ends in a partial page with a snapshot holds the snapshot before it makes room for the page's private
// copy: when dropping that snapshot is the only room there is, the lookup resumes from nothing rather than from
// positions without their state.
TEST_F(Qwen35PromptCache, AHitAlwaysCarriesTheStateOfItsPositions) {
  const SequenceMemorySpec spec = model->memory_spec();
  const int per_snapshot = pages_per_state_snapshot(spec, 16), total = 2 + per_snapshot;
  KvPool pool(spec, 16, total, 1);
  PromptCache cache(pool, *model, total, 0);  // the prefix's two pages and its snapshot fill the pool
  std::vector<uint64_t> keys(30);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = 700 + i;
  std::vector<int32_t> pages{*pool.allocate(), *pool.allocate()};
  const std::vector<float> state(spec.state_floats, 0.5f);
  EXPECT_EQ(cache.insert(keys, 20, pages, state.data()), 20);  // a full page, then 4 positions and the snapshot
  for (int32_t p : pages) pool.release(p);
  ASSERT_EQ(cache.stats().state_snapshots, 1);
  ASSERT_EQ(pool.pages_free(), 0);
  const CacheHit hit = cache.lookup(keys, 29);
  if (hit.positions > 0) {
    EXPECT_EQ(int(hit.state_pages.size()), per_snapshot) << hit.positions << " positions";
  }
  EXPECT_EQ(int(hit.pages.size()), (hit.positions + 15) / 16);
  for (int32_t p : hit.pages) pool.release(p);
  for (int32_t p : hit.state_pages) pool.release(p);
  EXPECT_EQ(pool.pages_used(), cache.stats().device_pages);
}

// With a host tier of a few pages, bringing a snapshot back to the device sends another node to the host tier, whose
// room-making drops the host tier's oldest leaves: never the node coming back (its pages leaked and the books drifted,
// so a lone stream later found no page).
TEST_F(Qwen35PromptCache, ANodeComingBackFromTheHostTierIsNotDroppedForItsRoom) {
  auto a = request(tokens(60, 11));
  auto b = request(tokens(50, 12), true);
  a.max_tokens = b.max_tokens = 40;
  for (int kv_pages : {8, 9}) {
    SCOPED_TRACE(std::to_string(kv_pages) + " pages");
    EngineOptions o = options(8, 8, 2);
    o.kv_pages = kv_pages;
    Engine e(*model, o);
    EngineRunner run(e);
    auto got_a = run.submit(a);
    auto got_b = run.submit(b);
    run.wait_all();
    EXPECT_GT(e.stats().preemptions, 0u);
    EXPECT_GT(e.stats().prompt_cache.host_restores, 0u);
    EXPECT_TRUE(same_bits(got_a->tokens, fresh(a)));
    EXPECT_TRUE(same_bits(got_b->tokens, fresh(b)));
    expect_idle_accounting(e);
  }
}

}  // namespace
}  // namespace fs::test

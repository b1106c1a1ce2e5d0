// (5) A request resumed from the prompt cache == the same request fresh with the cache off, bit for bit: a shared
// prefix ending inside a page and across page edges, and a second turn that extends the first turn's reply.
#include <gtest/gtest.h>

#include <cstring>

#include "conformance.h"
#include "engine/engine_runner.h"
#include "engine/state_snapshots.h"
#include "random_tokens.h"
#include "sequence_pool.h"

namespace fs::test {
namespace {

class PromptCacheResume : public Conformance {
 protected:
  GenerationRequest request(std::vector<int32_t> prompt, bool seeded) const {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = 6;
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 3;
    r.sampling.temperature = seeded ? 0.8f : 0.0f;
    r.sampling.seed = 42;
    return r;
  }

  static EngineOptions options(int cache_pages) {
    EngineOptions o;
    o.parallel = 2;
    o.context = 160;
    o.prefill_chunk = 24;
    o.round_tokens = 64;
    o.prompt_cache_pages = cache_pages;
    o.prompt_cache_state_stride = 16;
    return o;
  }

  // The positions a cached prefix of `n` resumes from (recurrent models resume at their last state snapshot, taken
  // at multiples of the stride and, for a model with aligned prompt chunks, of its alignment).
  int resumable(int n) const {
    const int stride = state_snapshot_stride(options(64), model->memory_spec(), model->prompt_alignment());
    return stride ? n / stride * stride : n;
  }

  // The request run alone with the cache off, on a second instance of the model: a device backend keeps one
  // engine's K/V at a time, and the engine under test still holds its cache.
  std::vector<SampledToken> fresh(const GenerationRequest& r) {
    if (!fresh_model) fresh_model = create_instance_model(GetParam(), config, checkpoint);
    return run_solo(*fresh_model, r, options(0));
  }

  std::unique_ptr<Model> fresh_model;

  // Pages of 16 positions one snapshot of the model's recurrent state takes.
  int snapshot_pages() const {
    const size_t page = model->kv_page_bytes(16);
    return int((model->memory_spec().state_bytes() + page - 1) / page);
  }

  std::vector<int32_t> tokens(int n, uint32_t seed) const { return random_tokens(n, seed, config.vocab_size); }

  static std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
};

// A state slot copied straight into snapshot pages (on the device for a device backend) reads back as the slot's
// state bit for bit, as the copy through the host does, and those pages copied into another slot give it that state.
TEST_P(PromptCacheResume, SlotCopiedIntoSnapshotPagesReadsBackBitForBit) {
  const SequenceMemorySpec spec = model->memory_spec();
  if (!spec.has_state()) GTEST_SKIP() << "no recurrent state";
  const int need = snapshot_pages();
  SequencePool seqs(*model, 2, 64, 2 * need);
  seqs.prefill(0, tokens(37, 5), 37);
  KvPool& pool = seqs.pool();
  ASSERT_EQ(model->state_snapshot_pages(pool), need);
  const std::vector<float> want = seqs.state(0);
  std::vector<int32_t> direct, through_host;
  for (int i = 0; i < need; ++i) direct.push_back(*pool.allocate()), through_host.push_back(*pool.allocate());
  model->state_to_pages(pool, seqs.state_slot(0), direct);
  model->write_state_pages(pool, through_host, want.data());
  for (const auto* pages : {&direct, &through_host}) {
    std::vector<float> got(want.size());
    model->read_state_pages(pool, *pages, got.data());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
  }
  model->pages_to_state(pool, direct, seqs.state_slot(1));
  const std::vector<float> resumed = seqs.state(1);
  ASSERT_EQ(resumed.size(), want.size());
  EXPECT_EQ(0, std::memcmp(resumed.data(), want.data(), want.size() * sizeof(float)));
}

// A forward pass writes a snapshot into pool pages (on the device for a device backend) with the bits it gives a
// host target, at positions inside a chunk and at its end, beside another stream.
TEST_P(PromptCacheResume, SnapshotsAPassWritesIntoPagesEqualItsHostSnapshots) {
  const SequenceMemorySpec spec = model->memory_spec();
  if (!spec.has_state()) GTEST_SKIP() << "no recurrent state";
  const int need = snapshot_pages();
  SequencePool seqs(*model, 2, 64, 2 * need);
  KvPool& pool = seqs.pool();
  ASSERT_EQ(model->state_snapshot_pages(pool), need);
  const std::vector<int32_t> ids = tokens(40, 9);
  std::vector<int32_t> pages[2];
  for (int i = 0; i < 2 * need; ++i) pages[i / need].push_back(*pool.allocate());
  std::vector<float> host[2];
  for (auto& h : host) h.resize(pool.state_floats());
  // Sequence 0 takes host snapshots after 21 and 40 positions, sequence 1 the same ones into pages.
  const StateSnapshotTarget to_host[] = {{21, host[0].data(), {}}, {40, host[1].data(), {}}};
  const StateSnapshotTarget to_pages[] = {{21, nullptr, pages[0]}, {40, nullptr, pages[1]}};
  SequenceChunk chunks[] = {seqs.chunk(0, ids, 0), seqs.chunk(1, ids, 0)};
  chunks[0].state_snapshots = to_host;
  chunks[1].state_snapshots = to_pages;
  seqs.forward(chunks);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE("snapshot " + std::to_string(i));
    std::vector<float> got(pool.state_floats());
    model->read_state_pages(pool, pages[i], got.data());
    EXPECT_EQ(0, std::memcmp(got.data(), host[i].data(), got.size() * sizeof(float)));
  }
  // The end-of-chunk snapshot is the state the slot holds.
  const std::vector<float> slot = seqs.state(1);
  EXPECT_EQ(0, std::memcmp(slot.data(), host[1].data(), slot.size() * sizeof(float)));
}

TEST_P(PromptCacheResume, SharedPrefixResumesAsFresh) {
  for (int shared_len : {5, 16, 17, 33}) {
    SCOPED_TRACE("shared prefix " + std::to_string(shared_len));
    const auto prefix = tokens(shared_len, uint32_t(shared_len));
    Engine engine(*model, options(64));
    EngineRunner run(engine);
    run.submit(request(cat(prefix, tokens(9, 100 + uint32_t(shared_len))), false));
    run.wait_all();
    for (bool seeded : {false, true}) {
      const auto second = request(cat(prefix, tokens(7, 200 + uint32_t(shared_len) + seeded)), seeded);
      auto got = run.submit(second);
      run.wait_all();
      EXPECT_EQ(got->result.cached_tokens, resumable(shared_len));
      EXPECT_TRUE(same_bits(got->tokens, fresh(second))) << (seeded ? "seeded" : "greedy");
    }
    const EngineStats s = engine.stats();
    EXPECT_EQ(s.kv_pages_used, s.prompt_cache.device_pages);
  }
}

TEST_P(PromptCacheResume, SecondTurnResumesAfterTheFirstReply) {
  const auto turn1 = tokens(30, 1);
  Engine engine(*model, options(64));
  EngineRunner run(engine);
  auto first = run.submit(request(turn1, true));
  run.wait_all();
  std::vector<int32_t> reply;
  for (const auto& t : first->tokens) reply.push_back(t.id);
  const auto turn2 = request(cat(cat(turn1, reply), tokens(5, 2)), true);
  auto second = run.submit(turn2);
  run.wait_all();
  // Every position with K/V from turn 1: the prompt and all but the last reply token. A model with aligned prompt
  // chunks resumes at its last snapshot inside turn 1's prompt (reply rows ran arithmetic a prompt does not).
  const int kept = model->prompt_alignment() > 1 ? resumable(int(turn1.size())) : int(turn1.size() + reply.size()) - 1;
  EXPECT_EQ(second->result.cached_tokens, kept);
  EXPECT_TRUE(same_bits(second->tokens, fresh(turn2)));
}

FS_CONFORMANCE_INSTANCES(PromptCacheResume);

}  // namespace
}  // namespace fs::test

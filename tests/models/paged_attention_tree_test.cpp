// Tree rows (SequenceChunk::row_parents): each row's attention, and a whole model's logits, are the bits of the chain
// that holds only its path; a kept row's K/V moves to its chain slot whole.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/error.h"
#include "core/files.h"
#include "model_harness.h"
#include "models/forward_rows.h"
#include "models/kv_pool.h"
#include "models/paged_attention.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

// Root row 0 (the pending token), two children, their children and a grandchild: depths 0, 1, 1, 2, 2, 2, 3.
const std::vector<int32_t> kParents = {-1, 0, 0, 1, 1, 2, 3};

std::vector<int32_t> path_of(int32_t row) {
  std::vector<int32_t> path;
  for (; row >= 0; row = kParents[size_t(row)]) path.insert(path.begin(), row);
  return path;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

struct Shape {
  int heads, kv_heads, head_dim, page_tokens, committed;
};

TEST(PagedAttentionTree, EachRowAttendsAsTheChainOfItsPath) {
  for (const Shape& sh : {Shape{4, 2, 16, 4, 5}, Shape{2, 1, 8, 16, 3}, Shape{6, 3, 32, 2, 9}}) {
    SCOPED_TRACE("heads " + std::to_string(sh.heads) + " page " + std::to_string(sh.page_tokens));
    std::mt19937 rng(uint32_t(sh.heads * 131 + sh.committed));
    const int T = int(kParents.size()), kv = sh.kv_heads * sh.head_dim, qw = sh.heads * sh.head_dim;
    const int slots = sh.committed + T, P = sh.page_tokens, npages = (slots + P - 1) / P;
    KvPool pool(1, sh.kv_heads, sh.head_dim, P, 2 * npages);
    std::vector<int32_t> tree_pages, chain_pages;
    for (int i = 0; i < npages; ++i) tree_pages.push_back(*pool.allocate());
    for (int i = 0; i < npages; ++i) chain_pages.push_back(*pool.allocate());
    const auto k = random_floats(size_t(slots) * kv, rng), v = random_floats(size_t(slots) * kv, rng);
    const auto q = random_floats(size_t(T) * qw, rng);
    const AttentionHeads heads{sh.heads, sh.kv_heads, sh.head_dim};

    // The tree: committed slots 0..committed-1, then row i in slot committed + i.
    const std::vector<int32_t> tokens(size_t(T), 0);
    SequenceChunk tree{tokens, sh.committed, tree_pages, true};
    tree.row_parents = kParents;
    std::vector<int> positions, chunk_of(size_t(slots), 0);
    for (int s = 0; s < slots; ++s) positions.push_back(s);
    const SequenceChunk all{std::span<const int32_t>(), 0, tree_pages};
    store_paged_kv({std::span<const SequenceChunk>(&all, 1), positions, chunk_of}, 0, k.data(), v.data(), pool);
    std::vector<int> tree_slots(positions.begin() + sh.committed, positions.end());
    std::vector<float> tree_out(size_t(T) * qw);
    paged_attention({std::span<const SequenceChunk>(&tree, 1), tree_slots, std::span<const int>(chunk_of.data(), T)},
                    heads, pool, 0, q.data(), tree_out.data());

    for (int32_t row = 0; row < T; ++row) {
      SCOPED_TRACE("row " + std::to_string(row));
      // The chain: the same committed K/V, then the path's rows at consecutive positions.
      const auto path = path_of(row);
      const int n = int(path.size());
      std::vector<float> ck(k.begin(), k.begin() + long(sh.committed) * kv),
          cv(v.begin(), v.begin() + long(sh.committed) * kv), cq;
      for (int32_t r : path) {
        const size_t at = size_t(sh.committed + r) * kv;
        ck.insert(ck.end(), k.begin() + long(at), k.begin() + long(at + kv));
        cv.insert(cv.end(), v.begin() + long(at), v.begin() + long(at + kv));
        cq.insert(cq.end(), q.begin() + long(r) * qw, q.begin() + long(r + 1) * qw);
      }
      const SequenceChunk chain_all{std::span<const int32_t>(), 0, chain_pages};
      std::vector<int> cpos(positions.begin(), positions.begin() + sh.committed + n), czero(cpos.size(), 0);
      store_paged_kv({std::span<const SequenceChunk>(&chain_all, 1), cpos, czero}, 0, ck.data(), cv.data(), pool);
      const std::vector<int32_t> ctokens(size_t(n), 0);
      const SequenceChunk chain{ctokens, sh.committed, chain_pages, true};
      std::vector<int> rows_pos(cpos.begin() + sh.committed, cpos.end());
      std::vector<float> chain_out(size_t(n) * qw);
      paged_attention({std::span<const SequenceChunk>(&chain, 1), rows_pos, std::span<const int>(czero.data(), n)},
                      heads, pool, 0, cq.data(), chain_out.data());
      EXPECT_TRUE(same_bits(tree_out.data() + size_t(row) * qw, chain_out.data() + size_t(n - 1) * qw, size_t(qw)));
    }
  }
}

TEST(PagedAttentionTree, AMovedRowCarriesEveryLayersKeysAndValues) {
  const int layers = 3, P = 4;
  KvPool pool(layers, 2, 8, P, 3);
  std::vector<int32_t> pages = {*pool.allocate(), *pool.allocate(), *pool.allocate()};
  std::mt19937 rng(7);
  for (int32_t p : pages)
    for (int l = 0; l < layers; ++l) {
      const auto r = random_floats(size_t(2 * P * pool.row_floats()), rng);
      std::copy(r.begin(), r.begin() + P * pool.row_floats(), pool.keys(p, l));
      std::copy(r.begin() + P * pool.row_floats(), r.end(), pool.values(p, l));
    }
  const int from = 10, to = 3;  // page 2 slot 2 → page 0 slot 3
  std::vector<std::vector<float>> want_k, want_v;
  for (int l = 0; l < layers; ++l) {
    const float* k = pool.keys(pages[2], l) + 2 * pool.row_floats();
    const float* v = pool.values(pages[2], l) + 2 * pool.row_floats();
    want_k.emplace_back(k, k + pool.row_floats());
    want_v.emplace_back(v, v + pool.row_floats());
  }
  const std::vector<float> untouched(pool.keys(pages[0], 0), pool.keys(pages[0], 0) + 3 * pool.row_floats());
  move_paged_kv(pool, pages, from, to);
  for (int l = 0; l < layers; ++l) {
    EXPECT_TRUE(same_bits(pool.keys(pages[0], l) + 3 * pool.row_floats(), want_k[size_t(l)].data(),
                          size_t(pool.row_floats())));
    EXPECT_TRUE(same_bits(pool.values(pages[0], l) + 3 * pool.row_floats(), want_v[size_t(l)].data(),
                          size_t(pool.row_floats())));
  }
  EXPECT_TRUE(same_bits(pool.keys(pages[0], 0), untouched.data(), untouched.size()));
}

TEST(PagedAttentionTree, ParentsMustBeEarlierRowsOfTheChunk) {
  const std::vector<int32_t> tokens = {1, 2, 3}, pages = {0};
  SequenceChunk c{tokens, 4, pages};
  for (const std::vector<int32_t>& bad : {std::vector<int32_t>{-1, 1, 0}, std::vector<int32_t>{-1, 0},
                                          std::vector<int32_t>{-2, 0, 1}}) {
    c.row_parents = bad;
    EXPECT_THROW(check_chunk_fits(c, 16), Error);
  }
  const std::vector<int32_t> good = {-1, 0, 0};
  c.row_parents = good;
  EXPECT_NO_THROW(check_chunk_fits(c, 16));
  EXPECT_EQ(row_depths(c), (std::vector<int>{0, 1, 1}));
}

TEST(PagedAttentionTree, FortuneDemoTreeRowsGiveTheOneRowStepsLogits) {
  FS_REQUIRE_SHARED(shared);
  const json cases = read_json_file(shared / "reference/fortune-demo/cases.json");
  const auto prompt = cases["cases"][0]["ids"].get<std::vector<int32_t>>();
  ModelHarness tree_run(shared / "models/fortune-demo", 256);
  const int V = tree_run.config.vocab_size;
  tree_run.prefill(prompt);
  // Row 0 is the pending token; the others are arbitrary tokens at their depths.
  std::vector<int32_t> rows;
  for (size_t i = 0; i < kParents.size(); ++i) rows.push_back(int32_t((i * 7919 + 31) % size_t(V)));
  SequenceChunk tree = tree_run.chunk(rows, int(prompt.size()), true);
  tree.row_parents = kParents;
  const auto logits = tree_run.model->forward(std::span<const SequenceChunk>(&tree, 1), *tree_run.pool);
  ASSERT_EQ(logits.size(), kParents.size() * size_t(V));
  for (int32_t row = 0; row < int32_t(kParents.size()); ++row) {
    SCOPED_TRACE("row " + std::to_string(row));
    ModelHarness chain_run(shared / "models/fortune-demo", 256);
    chain_run.prefill(prompt);
    std::vector<float> step;
    int pos = int(prompt.size());
    for (int32_t r : path_of(row)) step = chain_run.step(rows[size_t(r)], pos++);
    EXPECT_TRUE(same_bits(step.data(), logits.data() + size_t(row) * V, size_t(V)));
  }
}

}  // namespace
}  // namespace fs::test

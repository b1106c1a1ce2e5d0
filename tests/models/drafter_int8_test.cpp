// quantize_for_drafting on fortune-draft: the model keeps its greedy choices at nearly every position of a reference
// prompt while its matmuls read int8 copies (half the bytes of its bf16 weights).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/files.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "models/cpu_runner.h"
#include "models/kv_pool.h"
#include "models/model.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

// Greedy ids of every position of `prompt` run as one chunk; its logits into `logits`.
std::vector<int32_t> greedy_ids(Model& model, const std::vector<int32_t>& prompt, std::vector<float>* logits) {
  const int P = 16, pages = int(prompt.size() + P - 1) / P;
  KvPool pool(model.memory_spec(), P, pages, 0, model.kv_on_host());
  model.attach_pool(pool);
  std::vector<int32_t> table;
  for (int i = 0; i < pages; ++i) table.push_back(*pool.allocate());
  SequenceChunk chunk{prompt, 0, table, true};
  *logits = model.forward(std::span<const SequenceChunk>(&chunk, 1), pool);
  const size_t V = size_t(model.config().vocab_size);
  std::vector<int32_t> ids;
  for (size_t r = 0; r < prompt.size(); ++r)
    ids.push_back(int32_t(std::max_element(logits->begin() + long(r * V), logits->begin() + long((r + 1) * V)) -
                          (logits->begin() + long(r * V))));
  return ids;
}

TEST(DrafterInt8, FortuneDraftKeepsItsGreedyChoicesOnHalfTheBytes) {
  FS_REQUIRE_SHARED(shared);
  const auto dir = shared / "models/fortune-draft";
  const json cases = read_json_file(shared / "reference/fortune-demo/cases.json");
  auto exact = create_model(load_model_config(dir), Checkpoint::open(dir));
  auto approx = create_model(load_model_config(dir), Checkpoint::open(dir));
  const size_t bf16_bytes = approx->resident_weight_bytes();
  ASSERT_TRUE(quantize_for_drafting(*approx));
  EXPECT_LT(approx->resident_weight_bytes(), bf16_bytes);
  size_t same = 0, total = 0;
  bool differs = false;
  for (const auto& c : cases["cases"]) {
    const auto prompt = c["ids"].get<std::vector<int32_t>>();
    std::vector<float> a, b;
    const auto want = greedy_ids(*exact, prompt, &a);
    const auto got = greedy_ids(*approx, prompt, &b);
    for (size_t i = 0; i < want.size(); ++i) same += want[i] == got[i];
    total += want.size();
    differs = differs || a != b;
  }
  EXPECT_TRUE(differs) << "the int8 copies were not read";
  EXPECT_GE(double(same), 0.9 * double(total)) << same << " of " << total << " greedy choices kept";
  std::printf("fortune-draft on int8 weights keeps %zu of %zu greedy choices\n", same, total);
}

}  // namespace
}  // namespace fs::test

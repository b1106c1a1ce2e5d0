#include "model_harness.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "support/fixtures.h"

namespace fs::test {

ModelHarness::ModelHarness(const std::filesystem::path& dir, int max_positions) {
  config = load_model_config(dir);
  model = create_model(config, Checkpoint::open(dir));
  const int P = 16, n = (max_positions + P - 1) / P;
  const SequenceMemorySpec spec = model->memory_spec();
  pool = std::make_unique<KvPool>(spec, P, n, spec.has_state() ? 1 : 0);
  for (int i = 0; i < n; ++i) pages.push_back(*pool->allocate());
  if (spec.has_state()) state_slot = *pool->allocate_state();
}

SequenceChunk ModelHarness::chunk(std::span<const int32_t> ids, int start, bool all_logits) const {
  SequenceChunk c{ids, start, pages, all_logits};
  c.state_slot = state_slot;
  return c;
}

std::vector<float> ModelHarness::prefill(const std::vector<int32_t>& ids, int chunk) {
  if (chunk <= 0) chunk = int(ids.size());
  std::vector<float> logits;
  for (size_t start = 0; start < ids.size(); start += size_t(chunk)) {
    size_t n = std::min(ids.size() - start, size_t(chunk));
    SequenceChunk c = this->chunk(std::span<const int32_t>(ids.data() + start, n), int(start));
    logits = model->forward(std::span<const SequenceChunk>(&c, 1), *pool);
  }
  return logits;
}

std::vector<float> ModelHarness::step(int32_t id, int pos) {
  SequenceChunk c = chunk(std::span<const int32_t>(&id, 1), pos);
  return model->forward(std::span<const SequenceChunk>(&c, 1), *pool);
}

std::vector<int32_t> ModelHarness::greedy(const std::vector<int32_t>& ids, int steps) {
  std::vector<int32_t> out;
  auto logits = prefill(ids);
  int pos = int(ids.size());
  for (int s = 0; s < steps; ++s) {
    int32_t next = argmax(logits);
    out.push_back(next);
    if (s + 1 < steps) logits = step(next, pos++);
  }
  return out;
}

void expect_layers_close(const std::vector<float>& got, const std::vector<float>& want, size_t per_layer,
                         double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t layer = 0; layer * per_layer < got.size(); ++layer) {
    std::vector<float> a(got.begin() + long(layer * per_layer), got.begin() + long((layer + 1) * per_layer));
    std::vector<float> b(want.begin() + long(layer * per_layer), want.begin() + long((layer + 1) * per_layer));
    EXPECT_LE(rel_l2(a, b), tolerance) << "hidden states after layer " << layer;
  }
}

int32_t argmax(const std::vector<float>& v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace fs::test

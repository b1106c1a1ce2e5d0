#pragma once
// Loads a fixture model and runs prompts through it with a private KV pool, for reference tests.
#include <memory>
#include <vector>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "models/kv_pool.h"
#include "models/model.h"

namespace fs::test {

struct ModelHarness {
  ModelConfig config;
  std::unique_ptr<Model> model;
  std::unique_ptr<KvPool> pool;
  std::vector<int32_t> pages;
  int32_t state_slot = -1;  // the one sequence's recurrent state (models that carry one)

  explicit ModelHarness(const std::filesystem::path& dir, int max_positions = 512);
  // A chunk of `ids` at `start` over the harness's pages and state slot.
  SequenceChunk chunk(std::span<const int32_t> ids, int start, bool all_logits = false) const;
  // Prefill `ids` from position 0 (one chunk or chunks of `chunk`), returning the last position's logits.
  std::vector<float> prefill(const std::vector<int32_t>& ids, int chunk = 0);
  // One decode step at position `pos`.
  std::vector<float> step(int32_t id, int pos);
  // Greedy continuation of `steps` ids after `ids`.
  std::vector<int32_t> greedy(const std::vector<int32_t>& ids, int steps);
};

int32_t argmax(const std::vector<float>& v);
// Expects every layer's slice of `per_layer` floats of `got` within relative L2 `tolerance` of `want`'s.
void expect_layers_close(const std::vector<float>& got, const std::vector<float>& want, size_t per_layer,
                         double tolerance);

}  // namespace fs::test

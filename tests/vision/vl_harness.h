#pragma once
// Runs a tiny VL model's text side (Qwen2.5-VL, Qwen3.5) on a multimodal prompt with a private KV pool (M-RoPE positions and image
// features on the prompt chunk, plain positions plus rope_delta on decode steps).
#include <memory>
#include <vector>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "models/kv_pool.h"
#include "models/model.h"
#include "vision/multimodal_prompt.h"

namespace fs::test {

struct VlHarness {
  ModelConfig config;
  std::unique_ptr<Model> model;
  std::unique_ptr<KvPool> pool;
  std::vector<int32_t> pages;
  int32_t state_slot = -1;  // the sequence's recurrent state (models that carry one)

  VlHarness(const std::filesystem::path& dir, std::shared_ptr<Checkpoint> ck, int max_positions = 512) {
    config = load_model_config(dir);
    model = create_model(config, std::move(ck));
    const int P = 16, n = (max_positions + P - 1) / P;
    const SequenceMemorySpec spec = model->memory_spec();
    pool = std::make_unique<KvPool>(spec, P, n, spec.has_state() ? 1 : 0);
    for (int i = 0; i < n; ++i) pages.push_back(*pool->allocate());
    if (spec.has_state()) state_slot = *pool->allocate_state();
  }

  // Last-position logits of the whole prompt in one chunk.
  std::vector<float> prefill(const vision::MultimodalPrompt& p) {
    SequenceChunk c{p.ids, 0, pages, false};
    c.state_slot = state_slot;
    c.mrope_positions = p.mrope_positions;
    c.rope_delta = p.rope_delta;
    c.image_embeddings = p.image_embeddings;
    return model->forward(std::span<const SequenceChunk>(&c, 1), *pool);
  }

  std::vector<float> step(int32_t id, int pos, int rope_delta) {
    SequenceChunk c{std::span<const int32_t>(&id, 1), pos, pages, false};
    c.state_slot = state_slot;
    c.rope_delta = rope_delta;
    return model->forward(std::span<const SequenceChunk>(&c, 1), *pool);
  }

  std::vector<int32_t> greedy(const vision::MultimodalPrompt& p, int steps) {
    std::vector<int32_t> out;
    auto logits = prefill(p);
    int pos = int(p.ids.size());
    for (int s = 0; s < steps; ++s) {
      int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(next);
      if (s + 1 < steps) logits = step(next, pos++, p.rope_delta);
    }
    return out;
  }
};

}  // namespace fs::test

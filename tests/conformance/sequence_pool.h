#pragma once
// A private KV pool on a model's backend with pages (and a recurrent-state slot) for each of a few sequences, to
// drive Model::forward directly.
#include <memory>
#include <span>
#include <vector>

#include "models/kv_pool.h"
#include "models/model.h"

namespace fs::test {

class SequencePool {
 public:
  // `spare_pages` more pages stay free in the pool for a test to allocate.
  SequencePool(Model& model, int sequences, int positions, int spare_pages = 0);

  // A chunk of sequence `seq`: `ids` at positions from `start`.
  SequenceChunk chunk(int seq, std::span<const int32_t> ids, int start, bool all_logits = false) const;
  std::vector<float> forward(std::span<const SequenceChunk> chunks);
  // Sequence `seq` run from position 0 in chunks of `chunk` tokens; every chunk's logits in order (each row with
  // `all_logits`, else each chunk's last row).
  std::vector<float> prefill(int seq, const std::vector<int32_t>& ids, int chunk, bool all_logits = false);
  // Greedy ids of `steps` decode steps of sequence `seq` after `logits`, the first at position `pos`.
  std::vector<int32_t> greedy(int seq, std::vector<float> logits, int pos, int steps, int rope_delta = 0);
  KvPool& pool() { return *pool_; }
  // Sequence `seq`'s recurrent state as it stands (models with state), state_floats of the memory spec.
  std::vector<float> state(int seq);
  int32_t state_slot(int seq) const { return sequences_.at(size_t(seq)).state_slot; }

 private:
  struct Sequence {
    std::vector<int32_t> pages;
    int32_t state_slot = -1;
  };
  Model& model_;
  std::unique_ptr<KvPool> pool_;
  std::vector<Sequence> sequences_;
};

int32_t argmax(std::span<const float> row);

}  // namespace fs::test

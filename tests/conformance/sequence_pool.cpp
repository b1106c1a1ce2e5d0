#include "sequence_pool.h"

#include <algorithm>

namespace fs::test {

SequencePool::SequencePool(Model& model, int sequences, int positions, int spare_pages) : model_(model) {
  constexpr int kPageTokens = 16;
  const int per_sequence = (positions + kPageTokens - 1) / kPageTokens;
  const SequenceMemorySpec spec = model.memory_spec();
  pool_ = std::make_unique<KvPool>(spec, kPageTokens, sequences * per_sequence + spare_pages,
                                   spec.has_state() ? sequences : 0, model.kv_on_host());
  model.attach_pool(*pool_);
  for (int s = 0; s < sequences; ++s) {
    Sequence seq;
    for (int i = 0; i < per_sequence; ++i) seq.pages.push_back(*pool_->allocate());
    if (spec.has_state()) seq.state_slot = *pool_->allocate_state();
    sequences_.push_back(std::move(seq));
  }
}

SequenceChunk SequencePool::chunk(int seq, std::span<const int32_t> ids, int start, bool all_logits) const {
  const Sequence& s = sequences_.at(size_t(seq));
  SequenceChunk c{ids, start, s.pages, all_logits};
  c.state_slot = s.state_slot;
  return c;
}

std::vector<float> SequencePool::state(int seq) {
  std::vector<float> out(pool_->state_floats());
  model_.save_state(*pool_, sequences_.at(size_t(seq)).state_slot, out.data());
  return out;
}

std::vector<float> SequencePool::forward(std::span<const SequenceChunk> chunks) {
  return model_.forward(chunks, *pool_);
}

std::vector<float> SequencePool::prefill(int seq, const std::vector<int32_t>& ids, int chunk, bool all_logits) {
  std::vector<float> out;
  for (size_t start = 0; start < ids.size(); start += size_t(chunk)) {
    const size_t n = std::min(ids.size() - start, size_t(chunk));
    SequenceChunk c = this->chunk(seq, std::span<const int32_t>(ids.data() + start, n), int(start), all_logits);
    auto logits = forward(std::span<const SequenceChunk>(&c, 1));
    out.insert(out.end(), logits.begin(), logits.end());
  }
  return out;
}

std::vector<int32_t> SequencePool::greedy(int seq, std::vector<float> logits, int pos, int steps, int rope_delta) {
  std::vector<int32_t> out;
  for (int s = 0; s < steps; ++s) {
    int32_t id = argmax(logits);
    out.push_back(id);
    if (s + 1 == steps) break;
    SequenceChunk c = chunk(seq, std::span<const int32_t>(&id, 1), pos++);
    c.rope_delta = rope_delta;
    logits = forward(std::span<const SequenceChunk>(&c, 1));
  }
  return out;
}

int32_t argmax(std::span<const float> row) {
  return int32_t(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace fs::test

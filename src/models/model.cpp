#include "models/model.h"

#include <algorithm>

#include "core/error.h"
#include "models/kv_pool.h"

namespace fs {

void Model::copy_kv_positions(KvPool& pool, int32_t from, int32_t to, int positions) {
  pool.copy_positions(from, to, positions);
}

SampledForward Model::forward_sampled(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                                      KvPool& pool) {
  SampledForward out;
  out.logits = forward(chunks, pool);
  const size_t V = size_t(config().vocab_size);
  if (out.logits.size() != rows.size() * V) throw Error("forward_sampled: one RowSampling per logit row is required");
  out.ids.assign(rows.size(), -1);
  return out;
}

SequenceMemorySpec Model::memory_spec() const { return memory_spec_for(config()); }

size_t Model::kv_page_bytes(int page_tokens) const {
  const SequenceMemorySpec spec = memory_spec();
  return KvPool::bytes_per_page(spec.kv_layers, spec.kv_heads, spec.head_dim, page_tokens);
}

void Model::save_kv_page(KvPool& pool, int32_t page, float* dst) { pool.save_page(page, dst); }

void Model::load_kv_page(KvPool& pool, int32_t page, const float* src) { pool.load_page(page, src); }

void Model::save_state(KvPool& pool, int32_t slot, float* dst) {
  std::copy_n(pool.state(slot), pool.state_floats(), dst);
}

void Model::load_state(KvPool& pool, int32_t slot, const float* src) {
  std::copy_n(src, pool.state_floats(), pool.state(slot));
}

}  // namespace fs

#include "models/model.h"

#include <algorithm>

#include "core/error.h"
#include "models/kv_pool.h"
#include "models/paged_attention.h"

namespace fs {

void Model::copy_kv_positions(KvPool& pool, int32_t from, int32_t to, int positions) {
  pool.copy_positions(from, to, positions);
}

void Model::move_kv_row(KvPool& pool, std::span<const int32_t> pages, int from, int to) {
  move_paged_kv(pool, pages, from, to);
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

int Model::state_snapshot_pages(const KvPool& pool) const {
  if (pool.state_floats() == 0 || pool.page_floats() == 0) return 0;
  return int((pool.state_floats() + pool.page_floats() - 1) / pool.page_floats());
}

void Model::write_state_pages(KvPool& pool, std::span<const int32_t> pages, const float* state) {
  const size_t F = pool.page_floats(), n = pool.state_floats();
  std::vector<float> page(F);
  for (size_t i = 0; i < pages.size(); ++i) {
    std::fill(page.begin(), page.end(), 0.0f);
    if (i * F < n) std::copy_n(state + i * F, std::min(F, n - i * F), page.data());
    load_kv_page(pool, pages[i], page.data());
  }
}

void Model::state_to_pages(KvPool& pool, int32_t slot, std::span<const int32_t> pages) {
  std::vector<float> state(pool.state_floats());
  save_state(pool, slot, state.data());
  write_state_pages(pool, pages, state.data());
}

void Model::pages_to_state(KvPool& pool, std::span<const int32_t> pages, int32_t slot) {
  std::vector<float> state(pool.state_floats());
  read_state_pages(pool, pages, state.data());
  load_state(pool, slot, state.data());
}

void Model::read_state_pages(KvPool& pool, std::span<const int32_t> pages, float* state) {
  const size_t F = pool.page_floats(), n = pool.state_floats();
  std::vector<float> page(F);
  for (size_t i = 0; i < pages.size() && i * F < n; ++i) {
    save_kv_page(pool, pages[i], page.data());
    std::copy_n(page.data(), std::min(F, n - i * F), state + i * F);
  }
}

}  // namespace fs

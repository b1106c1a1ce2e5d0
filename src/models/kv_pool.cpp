#include "models/kv_pool.h"

#include <cstring>

#include "core/error.h"

namespace fs {

KvPool::KvPool(int layers, int kv_heads, int head_dim, int page_tokens, int pages, bool host_storage)
    : layers_(layers), row_floats_(kv_heads * head_dim), page_tokens_(page_tokens) {
  page_floats_per_side_ = size_t(page_tokens) * size_t(row_floats_);
  page_floats_ = page_floats_per_side_ * 2 * size_t(layers);
  if (host_storage) storage_ = ZeroedMemory(page_floats_ * size_t(pages) * sizeof(float));
  refs_.assign(size_t(pages), 0);
  free_.reserve(size_t(pages));
  for (int p = pages - 1; p >= 0; --p) free_.push_back(p);
}

KvPool::KvPool(const SequenceMemorySpec& spec, int page_tokens, int pages, int state_slots, bool host_storage)
    : KvPool(spec.kv_layers, spec.kv_heads, spec.head_dim, page_tokens, pages, host_storage) {
  state_floats_ = spec.state_floats;
  if (state_floats_ == 0 || state_slots <= 0) return;
  state_storage_ = ZeroedMemory(state_floats_ * size_t(state_slots) * sizeof(float));
  state_used_.assign(size_t(state_slots), false);
  for (int s = state_slots - 1; s >= 0; --s) state_free_.push_back(s);
}

std::optional<int32_t> KvPool::allocate_state() {
  if (state_free_.empty()) return std::nullopt;
  int32_t s = state_free_.back();
  state_free_.pop_back();
  state_used_[size_t(s)] = true;
  return s;
}

void KvPool::release_state(int32_t slot) {
  if (slot < 0 || size_t(slot) >= state_used_.size() || !state_used_[size_t(slot)])
    throw Error("state slot " + std::to_string(slot) + " released while free");
  state_used_[size_t(slot)] = false;
  state_free_.push_back(slot);
}

float* KvPool::state(int32_t slot) {
  if (slot < 0 || size_t(slot) >= state_used_.size() || !state_used_[size_t(slot)])
    throw Error("state slot " + std::to_string(slot) + " is not allocated");
  return state_storage_.floats() + size_t(slot) * state_floats_;
}

size_t KvPool::bytes_per_page(int layers, int kv_heads, int head_dim, int page_tokens) {
  return size_t(layers) * 2 * size_t(page_tokens) * size_t(kv_heads) * size_t(head_dim) * sizeof(float);
}

std::optional<int32_t> KvPool::allocate() {
  if (free_.empty()) return std::nullopt;
  int32_t p = free_.back();
  free_.pop_back();
  refs_[size_t(p)] = 1;
  return p;
}

void KvPool::retain(int32_t page) {
  if (refs_.at(size_t(page)) <= 0) throw Error("KV page retained while free");
  ++refs_[size_t(page)];
}

void KvPool::release(int32_t page) {
  int& r = refs_.at(size_t(page));
  if (r <= 0) throw Error("KV page released twice");
  if (--r == 0) free_.push_back(page);
}

void KvPool::release(std::span<const int32_t> pages) {
  for (int32_t p : pages) release(p);
}

void KvPool::copy_positions(int32_t from, int32_t to, int positions) {
  size_t n = size_t(positions) * size_t(row_floats_);
  for (int l = 0; l < layers_; ++l) {
    std::memcpy(keys(to, l), keys(from, l), n * sizeof(float));
    std::memcpy(values(to, l), values(from, l), n * sizeof(float));
  }
}

void KvPool::save_page(int32_t page, float* dst) const {
  std::memcpy(dst, storage_.floats() + size_t(page) * page_floats_, page_floats_ * sizeof(float));
}

void KvPool::load_page(int32_t page, const float* src) {
  std::memcpy(storage_.floats() + size_t(page) * page_floats_, src, page_floats_ * sizeof(float));
}

}  // namespace fs

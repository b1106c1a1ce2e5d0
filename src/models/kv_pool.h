#pragma once
// The KV cache as a pool of fixed-size pages shared by reference count. A page holds `page_tokens` positions of
// keys and values for every attending layer: [layer][k|v][position][kv_heads * head_dim] floats. Beside the pages,
// models with recurrent layers get state slots: one fixed-size block of floats per sequence.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/zeroed_memory.h"
#include "models/memory_spec.h"

namespace fs {

class KvPool {
 public:
  // Without host storage the pool only keeps the books (page ids, reference counts); a device backend holds the data.
  KvPool(int layers, int kv_heads, int head_dim, int page_tokens, int pages, bool host_storage = true);
  // Pages for the spec's attending layers and `state_slots` slots of its recurrent state.
  KvPool(const SequenceMemorySpec& spec, int page_tokens, int pages, int state_slots, bool host_storage = true);

  int page_tokens() const { return page_tokens_; }
  int pages_total() const { return int(refs_.size()); }
  int pages_free() const { return int(free_.size()); }
  int pages_used() const { return pages_total() - pages_free(); }
  static size_t bytes_per_page(int layers, int kv_heads, int head_dim, int page_tokens);

  // A free page with reference count 1, or nullopt when none is left.
  std::optional<int32_t> allocate();
  void retain(int32_t page);
  // Drops one reference; the page returns to the free list at zero.
  void release(int32_t page);
  // release for each page, in order.
  void release(std::span<const int32_t> pages);
  int refcount(int32_t page) const { return refs_.at(size_t(page)); }

  float* keys(int32_t page, int layer) { return base(page, layer); }
  float* values(int32_t page, int layer) { return base(page, layer) + page_floats_per_side_; }
  // Copies the first `positions` positions of every layer from one page to another.
  void copy_positions(int32_t from, int32_t to, int positions);
  // Floats one page holds (every layer, K and V).
  size_t page_floats() const { return page_floats_; }
  void save_page(int32_t page, float* dst) const;
  void load_page(int32_t page, const float* src);
  int row_floats() const { return row_floats_; }
  int layers() const { return layers_; }
  bool has_host_storage() const { return !storage_.empty(); }

  // A free state slot (its contents are stale: a sequence starting at position 0 clears it), or nullopt.
  std::optional<int32_t> allocate_state();
  void release_state(int32_t slot);
  float* state(int32_t slot);
  size_t state_floats() const { return state_floats_; }
  int state_slots_total() const { return int(state_used_.size()); }
  int state_slots_free() const { return int(state_free_.size()); }

 private:
  float* base(int32_t page, int layer) {
    return storage_.floats() + size_t(page) * page_floats_ + size_t(layer) * 2 * page_floats_per_side_;
  }

  int layers_, row_floats_, page_tokens_;
  size_t page_floats_per_side_, page_floats_;
  ZeroedMemory storage_;  // touched page by page as pages are first used
  std::vector<int> refs_;
  std::vector<int32_t> free_;
  size_t state_floats_ = 0;
  ZeroedMemory state_storage_;
  std::vector<bool> state_used_;
  std::vector<int32_t> state_free_;
};

}  // namespace fs

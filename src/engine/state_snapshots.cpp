#include "engine/state_snapshots.h"

#include <numeric>

#include "core/error.h"

namespace fs {

size_t page_floats_of(const SequenceMemorySpec& spec, int page_tokens) {
  return size_t(spec.kv_layers) * 2 * size_t(page_tokens) * size_t(spec.kv_heads) * size_t(spec.head_dim);
}

int pages_per_state_snapshot(const SequenceMemorySpec& spec, int page_tokens) {
  const size_t page = page_floats_of(spec, page_tokens);
  if (!spec.has_state() || page == 0) return 0;
  return int((spec.state_floats + page - 1) / page);
}

int state_snapshot_stride(const EngineOptions& o, const SequenceMemorySpec& spec, int alignment) {
  const int pages = pages_per_state_snapshot(spec, o.kv_page_tokens);
  if (pages == 0) return 0;
  if (o.prompt_cache_state_stride == 0) return std::lcm(pages * o.kv_page_tokens, alignment);
  if (o.prompt_cache_state_stride < 0 || o.prompt_cache_state_stride % o.kv_page_tokens != 0)
    throw Error("the prompt cache's state stride must be a positive multiple of the KV page size (" +
                std::to_string(o.kv_page_tokens) + " positions)");
  return std::lcm(o.prompt_cache_state_stride, alignment);
}

size_t state_snapshots_in_flight(const EngineOptions& o, const SequenceMemorySpec& spec) {
  if (!spec.has_state()) return 0;
  size_t n = 0;
  const int stride = state_snapshot_stride(o, spec);
  if (o.prompt_cache_pages > 0 && stride > 0) n += size_t(o.round_tokens / stride) + size_t(o.parallel) + 1;
  if (o.drafter && o.draft_tokens > 0) n += size_t(o.parallel) * size_t(o.draft_tokens);
  return n;
}

}  // namespace fs

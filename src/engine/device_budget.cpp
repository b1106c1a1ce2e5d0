#include "engine/device_budget.h"

#include <algorithm>

#include "core/error.h"
#include "models/kv_pool.h"

namespace fs {

RoundLimits largest_round(const EngineOptions& o) {
  const int window = 1 + (o.drafter ? std::max(0, o.draft_tokens) : 0);
  const int P = o.kv_page_tokens;
  RoundLimits r;
  r.logit_rows = o.parallel * window;
  // Decoding streams bring their windows whole; prefill fills the round up to round_tokens.
  r.rows = std::max(o.round_tokens, r.logit_rows);
  r.page_entries = size_t(o.parallel) * size_t((stream_positions(o) + P - 1) / P);
  r.pool_pages = kv_pool_pages(o);
  r.page_tokens = P;
  return r;
}

void size_prompt_cache_on_device(EngineOptions& o, const Model& model, double device_gib) {
  if (device_gib < 0) throw Error("prompt-cache budgets must be ≥ 0");
  const double page = double(model.kv_page_bytes(o.kv_page_tokens));
  o.prompt_cache_pages = int(std::min(device_gib * double(1ull << 30) / page, 1e9));
}

MemoryBudget device_budget(const Model& model, const EngineOptions& o, size_t free_bytes) {
  MemoryBudget b;
  b.where = "device memory";
  b.available = free_bytes;
  b.resident.push_back({"weights", model.weight_bytes()});
  const int pages = kv_pool_pages(o);
  const size_t page_bytes = model.kv_page_bytes(o.kv_page_tokens);
  b.lines.push_back({"KV pages (a pool of " + std::to_string(pages) + " pages of " + std::to_string(page_bytes) +
                         " bytes, at most " + std::to_string(stream_positions(o)) + " positions per stream)",
                     size_t(pages) * page_bytes});
  const SequenceMemorySpec spec = model.memory_spec();
  if (spec.has_state())
    b.lines.push_back({"recurrent state slots (" + std::to_string(o.parallel) + " streams × " +
                           std::to_string(spec.state_bytes()) + " bytes)",
                       size_t(o.parallel) * spec.state_bytes()});
  const RoundLimits r = largest_round(o);
  b.lines.push_back({"scratch for rounds of " + std::to_string(r.rows) + " rows (" + std::to_string(r.logit_rows) +
                         " with logits)",
                     model.round_scratch_bytes(r)});
  b.lines.push_back({"reserve", kDeviceReserveBytes});
  return b;
}

int device_kv_pages_that_fit(const Model& model, const EngineOptions& o, size_t free_bytes) {
  EngineOptions trial = o;
  auto fits = [&](int pages) {
    trial.kv_pages = pages;
    return device_budget(model, trial, free_bytes).fits();
  };
  if (!fits(1)) return 0;
  // More pages than free_bytes holds never fit; the budget grows with the pool, so the largest that fits is found
  // by bisection between one page and that bound.
  const size_t page = std::max<size_t>(model.kv_page_bytes(o.kv_page_tokens), 1);
  int lo = 1, hi = int(std::min<size_t>(free_bytes / page + 1, size_t(1) << 30));
  if (fits(hi)) return hi;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

int device_kv_pool_pages_for_serving(const Model& model, const EngineOptions& o, size_t free_bytes) {
  const long long per_stream = (o.context + o.kv_page_tokens - 1) / o.kv_page_tokens;
  const long long wanted = per_stream * o.parallel + std::max(0, o.prompt_cache_pages);
  const long long room = device_kv_pages_that_fit(model, o, free_bytes);
  return int(std::max(per_stream, std::min({wanted, room, 1ll << 30})));
}

MemoryBudget host_budget_beside_device(const Model& model, const EngineOptions& o, std::vector<BudgetLine> others,
                                       size_t available) {
  MemoryBudget b;
  b.where = "RAM";
  b.available = available;
  const SequenceMemorySpec spec = model.memory_spec();
  if (o.prompt_cache_host_pages > 0) {
    const size_t page = KvPool::bytes_per_page(spec.kv_layers, spec.kv_heads, spec.head_dim, o.kv_page_tokens);
    b.lines.push_back({"prompt cache host tier (" + std::to_string(o.prompt_cache_host_pages) + " pages)",
                       size_t(o.prompt_cache_host_pages) * page});
  }
  add_state_snapshot_line(b, o, spec);
  for (auto& l : others)
    if (l.bytes > 0) b.lines.push_back(std::move(l));
  if (!b.lines.empty()) b.lines.push_back({"reserve", size_t(256) << 20});
  return b;
}

}  // namespace fs

#pragma once
// The start-up memory budget of a model whose sequence memory lives on a device: its KV pool in the device's bytes
// per page, the scratch its rounds keep and a reserve, checked against the device memory free after the weights
// are resident; and the little a device engine keeps in host memory.
#include <cstddef>
#include <vector>

#include "engine/engine.h"
#include "engine/memory_budget.h"
#include "models/model.h"

namespace fs {

// Device memory kept free for what no line counts: the driver's and kernels' own allocations, graph launches.
inline constexpr size_t kDeviceReserveBytes = size_t(512) << 20;

// The largest round `options` lets the engine run: rows (every stream's verify window, or the round's tokens),
// logit rows, page-table entries, and the pool it runs over.
RoundLimits largest_round(const EngineOptions& options);

// Sets the prompt cache's device pages from GiB in the model's own bytes per page (its host tier is left as set).
void size_prompt_cache_on_device(EngineOptions& options, const Model& model, double device_gib);

// Budget of `model`'s device for `options`, `free_bytes` being free with the weights already resident: the KV pool
// (kv_pool_pages(options) pages), recurrent state slots, round scratch and the reserve.
MemoryBudget device_budget(const Model& model, const EngineOptions& options, size_t free_bytes);

// The most KV pool pages device_budget fits into `free_bytes`; 0 when not even one page fits.
int device_kv_pages_that_fit(const Model& model, const EngineOptions& options, size_t free_bytes);

// The pool a device server starts with: room for `parallel` full-context streams and the prompt cache, shrunk to
// what the device leaves (the reserve line keeps its headroom), never below one full-context stream (the budget then
// refuses what cannot fit, with the numbers).
int device_kv_pool_pages_for_serving(const Model& model, const EngineOptions& options, size_t free_bytes);

// What a device engine keeps in host RAM: the prompt cache's host tier (pages saved as f32) and the caller's
// `others`, plus a reserve; no lines at all when there is nothing to keep.
MemoryBudget host_budget_beside_device(const Model& model, const EngineOptions& options,
                                       std::vector<BudgetLine> others, size_t available);

}  // namespace fs

#pragma once
// The start-up memory budget: weights + scratch + KV pages + prompt cache + pinned stages + reserve, summed and
// checked against what the machine (or device) has, before anything is served.
#include <cstddef>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "io/hf_config.h"
#include "models/memory_spec.h"

namespace fs {

struct BudgetLine {
  std::string what;
  size_t bytes;
};

struct MemoryBudget {
  std::string where;  // "RAM" or "device memory"
  size_t available = 0;
  std::vector<BudgetLine> lines;
  // Memory already allocated when `available` was read: reported, not summed.
  std::vector<BudgetLine> resident;

  size_t total() const;
  bool fits() const { return total() <= available; }
  // One line per item and a total, for printing at start.
  std::string report() const;
  // Throws fs::Error naming what is short and by how much.
  void require() const;
};

// MemAvailable from /proc/meminfo (0 when unreadable).
size_t available_ram_bytes();
std::string format_gib(size_t bytes);

// Sets the prompt cache's page budgets from GiB for this model's page size.
void size_prompt_cache(EngineOptions& options, const ModelConfig& config, double device_gib, double host_gib);

// Budget of a CPU engine for `options` on `config` with `weight_bytes` of weights. With options.kv_pages set, one
// line holds the whole pool (the prompt cache's pages live inside it).
// The line for recurrent-state snapshots held on the host while rounds take them (none when there are none).
void add_state_snapshot_line(MemoryBudget& budget, const EngineOptions& options, const SequenceMemorySpec& spec);

MemoryBudget cpu_budget(const ModelConfig& config, size_t weight_bytes, const EngineOptions& options,
                        size_t available);

// KV pool pages (options.kv_pages) that fit what `available` leaves after every other line of cpu_budget: weights,
// scratch, the prompt cache's host tier and the reserve. 0 when nothing is left.
int kv_pages_that_fit(const ModelConfig& config, size_t weight_bytes, const EngineOptions& options, size_t available);

// The pool a server starts with: room for `parallel` full-context streams and the prompt cache, shrunk to half of
// what memory leaves (a CPU pool is allocated whole at start), never below one full-context stream (the budget then
// refuses what cannot fit, with the numbers).
int kv_pool_pages_for_serving(const ModelConfig& config, size_t weight_bytes, const EngineOptions& options,
                              size_t available);

}  // namespace fs

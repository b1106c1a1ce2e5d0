#include "engine/memory_budget.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "engine/state_snapshots.h"
#include "models/kv_pool.h"
#include "models/model.h"

namespace fs {

size_t MemoryBudget::total() const {
  size_t n = 0;
  for (const auto& l : lines) n += l.bytes;
  return n;
}

std::string format_gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1ull << 30));
  return buf;
}

std::string MemoryBudget::report() const {
  std::ostringstream out;
  out << "memory budget (" << where << "):\n";
  for (const auto& l : resident) out << "  " << l.what << ": " << format_gib(l.bytes) << " (resident)\n";
  for (const auto& l : lines) out << "  " << l.what << ": " << format_gib(l.bytes) << "\n";
  out << "  total: " << format_gib(total()) << " of " << format_gib(available) << " available"
      << (resident.empty() ? "" : " beside the resident lines") << "\n";
  return out.str();
}

void MemoryBudget::require() const {
  if (fits()) return;
  size_t kv = 0, rest = 0;
  std::string kv_what;
  for (const auto& l : lines) {
    if (l.what.rfind("KV pages", 0) == 0) {
      kv += l.bytes;
      kv_what = l.what;
    } else {
      rest += l.bytes;
    }
  }
  std::string msg = "the configuration does not fit in " + where + ": it needs " + format_gib(total()) + ", " +
                    format_gib(available) + " is available (short by " + format_gib(total() - available) + ")";
  if (rest < available && kv > 0)
    msg += "; the memory budget leaves " + format_gib(available - rest) + " for the KV cache, and " + kv_what +
           " need " + format_gib(kv);
  throw Error(msg);
}

size_t available_ram_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t value = 0;
  std::string unit;
  while (in >> key >> value >> unit)
    if (key == "MemAvailable:") return value * 1024;
  return 0;
}

namespace {

// Bytes of one KV page: K and V of the layers the model's memory spec says attend.
size_t page_bytes_of(const ModelConfig& c, int page_tokens) {
  const SequenceMemorySpec spec = memory_spec_for(c);
  return KvPool::bytes_per_page(spec.kv_layers, spec.kv_heads, spec.head_dim, page_tokens);
}

}  // namespace

void size_prompt_cache(EngineOptions& o, const ModelConfig& c, double device_gib, double host_gib) {
  if (device_gib < 0 || host_gib < 0) throw Error("prompt-cache budgets must be ≥ 0");
  const double page = double(page_bytes_of(c, o.kv_page_tokens));
  o.prompt_cache_pages = int(std::min(device_gib * double(1ull << 30) / page, 1e9));
  o.prompt_cache_host_pages = int(std::min(host_gib * double(1ull << 30) / page, 1e9));
}

void add_state_snapshot_line(MemoryBudget& b, const EngineOptions& o, const SequenceMemorySpec& spec) {
  if (const size_t in_flight = state_snapshots_in_flight(o, spec))
    b.lines.push_back({"recurrent state snapshots in flight (" + std::to_string(in_flight) + " × " +
                           std::to_string(spec.state_bytes()) + " bytes)",
                       in_flight * spec.state_bytes()});
}

MemoryBudget cpu_budget(const ModelConfig& c, size_t weight_bytes, const EngineOptions& o, size_t available) {
  MemoryBudget b;
  b.where = "RAM";
  b.available = available;
  b.lines.push_back({"weights", weight_bytes});
  const size_t P = size_t(o.kv_page_tokens);
  const size_t page_bytes = page_bytes_of(c, int(P));
  if (o.kv_pages > 0) {
    b.lines.push_back({"KV pages (a pool of " + std::to_string(o.kv_pages) + " pages, at most " +
                           std::to_string(stream_positions(o)) + " positions per stream)",
                       size_t(o.kv_pages) * page_bytes});
  } else {
    const size_t pages = size_t(o.parallel) * ((size_t(o.context) + P - 1) / P);
    b.lines.push_back({"KV pages for " + std::to_string(o.parallel) + " streams of " + std::to_string(o.context) +
                           " positions",
                       pages * page_bytes});
    if (o.prompt_cache_pages > 0)
      b.lines.push_back({"prompt cache (" + std::to_string(o.prompt_cache_pages) + " pages)",
                         size_t(o.prompt_cache_pages) * page_bytes});
  }
  if (o.prompt_cache_host_pages > 0)
    b.lines.push_back({"prompt cache host tier (" + std::to_string(o.prompt_cache_host_pages) + " pages)",
                       size_t(o.prompt_cache_host_pages) * page_bytes});
  const SequenceMemorySpec spec = memory_spec_for(c);
  if (spec.has_state())
    b.lines.push_back({"recurrent state slots (" + std::to_string(o.parallel) + " streams × " +
                           std::to_string(spec.state_bytes()) + " bytes)",
                       size_t(o.parallel) * spec.state_bytes()});
  // Snapshots kept by the prompt cache live in its pool pages; those being taken or handed over are counted here.
  add_state_snapshot_line(b, o, spec);
  const size_t rows = size_t(o.round_tokens) + size_t(o.parallel);
  const size_t per_row = size_t(c.hidden_size) * 4 + size_t(c.num_heads) * size_t(c.head_dim) * 2 +
                         size_t(c.num_kv_heads) * size_t(c.head_dim) * 2 + size_t(c.intermediate_size) * 2;
  const size_t scratch = rows * per_row * sizeof(float) + size_t(o.parallel) * size_t(c.vocab_size) * sizeof(float) +
                         size_t(o.context) * sizeof(float) * 4;
  b.lines.push_back({"scratch for rounds of " + std::to_string(rows) + " rows", scratch});
  b.lines.push_back({"reserve", size_t(256) << 20});
  return b;
}

int kv_pages_that_fit(const ModelConfig& c, size_t weight_bytes, const EngineOptions& o, size_t available) {
  EngineOptions one = o;
  one.kv_pages = 1;
  MemoryBudget b = cpu_budget(c, weight_bytes, one, available);
  const size_t page_bytes = page_bytes_of(c, o.kv_page_tokens);
  const size_t rest = b.total() - page_bytes;
  if (rest >= available) return 0;
  return int(std::min<size_t>((available - rest) / page_bytes, size_t(1) << 30));
}

}  // namespace fs

namespace fs {

int kv_pool_pages_for_serving(const ModelConfig& c, size_t weight_bytes, const EngineOptions& o, size_t available) {
  const long long per_stream = (o.context + o.kv_page_tokens - 1) / o.kv_page_tokens;
  const long long wanted = per_stream * o.parallel + std::max(0, o.prompt_cache_pages);
  const long long room = kv_pages_that_fit(c, weight_bytes, o, available) / 2;
  return int(std::max(per_stream, std::min({wanted, room, 1ll << 30})));
}

}  // namespace fs

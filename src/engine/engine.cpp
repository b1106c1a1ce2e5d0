#include "engine/engine.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "core/error.h"
#include "engine/drafters/drafter.h"
#include "engine/state_snapshots.h"
#include "engine/stream.h"
#include "models/kv_pool.h"
#include "models/model.h"

namespace fs {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "error";
}

static uint64_t fresh_seed() {
  static std::mutex mu;
  static std::random_device rd;
  std::lock_guard lock(mu);
  return (uint64_t(rd()) << 32) ^ rd();
}

int kv_pool_pages(const EngineOptions& o) {
  if (o.kv_pages > 0) return o.kv_pages;
  const int P = o.kv_page_tokens;
  return o.parallel * ((o.context + P - 1) / P) + std::max(0, o.prompt_cache_pages);
}

int stream_positions(const EngineOptions& o) {
  return int(std::min<int64_t>(o.context, int64_t(kv_pool_pages(o)) * o.kv_page_tokens));
}

Engine::Engine(Model& model, EngineOptions options) : model_(model), options_(options) {
  if (options_.parallel < 1) throw Error("--parallel must be at least 1");
  if (options_.context < 2) throw Error("--context must be at least 2");
  if (options_.prefill_chunk < 1 || options_.round_tokens < 1) throw Error("chunk sizes must be positive");
  if (options_.kv_page_tokens < 1) throw Error("a KV page must hold at least one position");
  if (options_.kv_pages < 0) throw Error("--kv-pages must be ≥ 0");
  if (options_.draft_tokens < 0) throw Error("--draft-tokens must be ≥ 0");
  const SequenceMemorySpec spec = model_.memory_spec();
  state_slots_ = spec.has_state();
  if (options_.draft_tree < 1) throw Error("--draft-tree must be ≥ 1");
  if (options_.draft_tree > 1 && options_.drafter && !model_.supports_row_parents()) {
    std::fprintf(stderr, "foldserve: draft trees are off for %s on the %s: its forward has no row parents; drafting "
                 "chains\n", model_.config().architecture.c_str(), model_.device_name());
    options_.draft_tree = 1;
  }
  chunks_ = {options_.prefill_chunk, std::max(1, model_.prompt_alignment())};
  state_stride_ = state_snapshot_stride(options_, spec, chunks_.align);
  const bool cache_asked = options_.prompt_cache_pages > 0 || options_.prompt_cache_host_pages > 0;
  if (state_slots_ && state_stride_ == 0 && cache_asked) {
    std::fprintf(stderr, "foldserve: the prompt cache is off for %s: it has no attention layers to keep pages of\n",
                 model_.config().architecture.c_str());
    options_.prompt_cache_pages = 0;
    options_.prompt_cache_host_pages = 0;
  }
  const int P = options_.kv_page_tokens;
  const int pages = kv_pool_pages(options_);
  stream_positions_ = stream_positions(options_);
  pool_ = std::make_unique<KvPool>(spec, P, pages, state_slots_ ? options_.parallel : 0, model_.kv_on_host());
  model_.attach_pool(*pool_);
  if (options_.prompt_cache_pages > 0)
    cache_ = std::make_unique<PromptCache>(*pool_, model_, options_.prompt_cache_pages,
                                           std::max(0, options_.prompt_cache_host_pages));
  stats_.kv_pages_total = pages;
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  cache_.reset();
}

std::shared_ptr<StreamHandle> Engine::submit(GenerationRequest request) {
  const int n = int(request.prompt.size());
  if (n == 0) throw Error("the prompt is empty");
  if (n >= options_.context)
    throw Error("the prompt has " + std::to_string(n) + " tokens; the context holds " +
                std::to_string(options_.context) + " positions (prompt and reply)");
  if (n >= stream_positions_)
    throw Error("the prompt has " + std::to_string(n) + " tokens; the whole KV pool holds " +
                std::to_string(pool_->pages_total()) + " pages of " + std::to_string(pool_->page_tokens()) +
                " positions = " + std::to_string(stream_positions_) + " positions (prompt and reply)");
  for (int32_t id : request.prompt)
    if (id < 0 || id >= model_.config().vocab_size)
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(model_.config().vocab_size));
  if (request.max_tokens < 1) throw Error("max_tokens must be at least 1");
  if (!request.mrope_positions.empty() && request.mrope_positions.size() != size_t(n) * 3)
    throw Error("M-RoPE positions must hold three entries per prompt token");
  if (!request.cache_keys.empty() && request.cache_keys.size() != size_t(n))
    throw Error("prompt-cache keys must cover the prompt");
  auto s = std::make_unique<Stream>();
  s->tokens = request.prompt;
  s->prompt_len = n;
  if (request.cache_keys.empty()) s->keys.assign(request.prompt.begin(), request.prompt.end());
  else s->keys = request.cache_keys;
  s->seed = request.sampling.seed ? *request.sampling.seed : fresh_seed();
  for (int32_t id : request.prompt) ++s->counts.prompt[id];
  s->request = std::move(request);
  s->handle = std::make_shared<StreamHandle>();
  auto handle = s->handle;
  {
    std::lock_guard lock(mu_);
    if (int(queue_.size()) >= options_.queue_limit) return nullptr;
    s->id = next_id_++;
    queue_.push_back(std::move(s));
    stats_.queued = int(queue_.size());
  }
  wake_.notify_one();
  return handle;
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Engine::run() {
  Streams active;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty() || !active.empty(); });
      if (stop_) break;
    }
    try {
      admit(active);
      round(active);
    } catch (const std::exception& e) {
      fail_round(active, e.what());
    } catch (...) {
      fail_round(active, "an unknown exception");
    }
  }
  for (auto& s : active) finish(*s, FinishReason::Cancelled);
  std::deque<std::unique_ptr<Stream>> waiting;
  {
    std::lock_guard lock(mu_);
    waiting.swap(queue_);
  }
  for (auto& s : waiting) finish(*s, FinishReason::Cancelled);
}

void Engine::fail_round(Streams& active, const std::string& error) {
  std::fprintf(stderr, "foldserve: engine round failed, ending its %zu streams: %s\n", active.size(), error.c_str());
  for (auto& s : active) finish(*s, FinishReason::Error, error);
  active.clear();
  std::lock_guard lock(mu_);
  stats_.active_streams = 0;
  stats_.kv_pages_used = pool_->pages_used();
}

void Engine::publish_cache_stats() {
  std::lock_guard lock(mu_);
  if (cache_) stats_.prompt_cache = cache_->stats();
  stats_.kv_pages_used = pool_->pages_used();
}

// Never throws: a prefix the prompt cache fails to keep is only logged, a failure to hand the pages back turns the
// reason into Error, and on_done's own exception is logged.
void Engine::finish(Stream& s, FinishReason reason, const std::string& error) {
  if (s.finished) return;
  s.finished = true;
  std::string why = error;
  try {
    if (reason != FinishReason::Error) keep_in_cache(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "foldserve: the prompt cache could not keep stream %llu: %s\n", (unsigned long long)s.id,
                 e.what());
  }
  try {
    pool_->release(s.pages);
    release_resume_state(s);
    drop_state_snapshots(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "foldserve: releasing the pages of stream %llu failed: %s\n", (unsigned long long)s.id,
                 e.what());
    reason = FinishReason::Error;
    why = e.what();
  }
  s.pages.clear();
  release_state_slot(s);
  if (options_.drafter) {
    try {
      options_.drafter->forget(s.id);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "foldserve: the drafter could not forget stream %llu: %s\n", (unsigned long long)s.id,
                   e.what());
    }
  }
  publish_cache_stats();
  GenerationResult r;
  r.reason = reason;
  r.prompt_tokens = s.prompt_len;
  r.cached_tokens = s.cached;
  r.completion_tokens = s.generated;
  r.drafted_tokens = s.drafted;
  r.accepted_tokens = s.accepted;
  r.error = why;
  auto on_done = std::move(s.request.on_done);
  s.request.on_done = nullptr;
  try {
    if (on_done) on_done(r);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "foldserve: on_done of stream %llu threw: %s\n", (unsigned long long)s.id, e.what());
  } catch (...) {
    std::fprintf(stderr, "foldserve: on_done of stream %llu threw\n", (unsigned long long)s.id);
  }
}

}  // namespace fs

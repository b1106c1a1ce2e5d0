// The engine's page books: admission by pages, page growth, and preemption of the youngest stream when the pool
// runs dry.
#include <cstdio>
#include <iterator>

#include "core/error.h"
#include "engine/admission.h"
#include "engine/engine.h"
#include "engine/scheduler.h"
#include "engine/stream.h"
#include "models/kv_pool.h"

namespace fs {

int Engine::room() const { return pool_->pages_free() + (cache_ ? cache_->evictable_pages() : 0); }

void Engine::finish_cancelled_in_queue() {
  Streams gone;
  {
    std::lock_guard lock(mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((*it)->handle->cancelled()) {
        gone.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    stats_.queued = int(queue_.size());
  }
  for (auto& s : gone) finish(*s, FinishReason::Cancelled);
}

// The last token is always computed, so the stream gets logits to sample from.
void Engine::adopt_cached_prefix(Stream& s) {
  if (!cache_) return;
  CacheHit hit = cache_->lookup(s.keys, int(s.tokens.size()) - 1, false);
  s.pages = std::move(hit.pages);
  s.computed = hit.positions;
  s.resume_state_pages = std::move(hit.state_pages);
}

void Engine::admit(Streams& active) {
  finish_cancelled_in_queue();
  const int P = pool_->page_tokens();
  int reserved = 0;
  for (auto& s : active) reserved += pages_to_reserve(*s, chunks_, P, stream_positions_);
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (queue_.empty()) break;
      // Nothing adopted yet: pages from position 0, a lower bound of what it will take.
      const int guess = pages_to_admit(*queue_.front(), chunks_, P);
      if (!may_admit(int(active.size()), options_.parallel, room(), reserved, guess)) break;
      active.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    Stream& s = *active.back();
    adopt_cached_prefix(s);
    // The adopted pages have left the room; what is left must still hold the next chunk.
    if (!may_admit(int(active.size()) - 1, options_.parallel, room(), reserved, pages_to_admit(s, chunks_, P))) {
      reset_to_queued(s, false);
      std::lock_guard lock(mu_);
      queue_.push_front(std::move(active.back()));
      active.pop_back();
      break;
    }
    take_state_slot(s);
    restore_cached_state(s);
    if (!s.admitted) {
      s.admitted = true;
      s.cached = s.computed;
      if (cache_) cache_->count_lookup(s.cached);
    }
    reserved += pages_to_reserve(s, chunks_, P, stream_positions_);
  }
  {
    std::lock_guard lock(mu_);
    stats_.queued = int(queue_.size());
    stats_.active_streams = int(active.size());
  }
  publish_cache_stats();
}

bool Engine::grow_pages(Stream& s, int positions) {
  const int P = pool_->page_tokens();
  while (int(s.pages.size()) * P < positions) {
    auto page = pool_->allocate();
    while (!page && cache_ && cache_->evict_one()) page = pool_->allocate();
    if (!page) return false;
    s.pages.push_back(*page);
  }
  return true;
}

void Engine::reset_to_queued(Stream& s, bool keep_prefix) {
  if (keep_prefix) park_in_cache(s);
  pool_->release(s.pages);
  s.pages.clear();
  s.computed = 0;
  release_resume_state(s);
  drop_state_snapshots(s);
  s.drop_draft();
  s.window_states = {};  // a queued stream holds no window buffers (the budget counts them per admitted stream)
  s.spare_states = {};
  s.window_end = 0;
  release_state_slot(s);
}

void Engine::take_state_slot(Stream& s) {
  if (!state_slots_ || s.state_slot >= 0) return;
  auto slot = pool_->allocate_state();
  // Slots number `parallel` and admission keeps at most `parallel` streams active.
  if (!slot) throw Error("no recurrent-state slot is free for an admitted stream");
  s.state_slot = *slot;
}

void Engine::release_state_slot(Stream& s) {
  if (s.state_slot < 0) return;
  try {
    pool_->release_state(s.state_slot);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "foldserve: releasing the state slot of stream %llu failed: %s\n", (unsigned long long)s.id,
                 e.what());
  }
  s.state_slot = -1;
}

std::vector<RoundItem> Engine::plan_within_pool(std::vector<Stream*>& order) {
  for (;;) {
    auto items = plan_round(order, chunks_, options_.round_tokens, options_.prefill_first);
    bool fits = true;
    for (const auto& it : items) fits = fits && grow_pages(*it.stream, it.begin + it.count);
    if (fits) {
      plan_state_snapshots(items);
      return items;
    }
    // Drafts are only speed: drop them all before preempting anyone.
    bool drafts = false;
    for (Stream* s : order) {
      drafts = drafts || !s->draft.empty();
      s->drop_draft();
    }
    if (drafts) continue;
    // A lone stream has the whole pool, which holds stream_positions; running short then breaks the books.
    if (order.size() == 1)
      throw Error("the KV pool of " + std::to_string(pool_->pages_total()) + " pages cannot hold the next chunk of " +
                  "its only stream, at " + std::to_string(order.front()->computed) + " positions");
    Stream& youngest = *order.back();
    order.pop_back();
    reset_to_queued(youngest, true);
    youngest.preempted = true;
    std::lock_guard lock(mu_);
    ++stats_.preemptions;
  }
}

void Engine::retire(Streams& active) {
  Streams kept, preempted;
  for (auto& s : active) {
    if (s->finished) continue;
    keep_state_snapshots(*s);
    if (s->preempted) {
      s->preempted = false;
      preempted.push_back(std::move(s));
    } else {
      kept.push_back(std::move(s));
    }
  }
  active.swap(kept);
  std::lock_guard lock(mu_);
  queue_.insert(queue_.begin(), std::make_move_iterator(preempted.begin()), std::make_move_iterator(preempted.end()));
  stats_.queued = int(queue_.size());
  stats_.active_streams = int(active.size());
}

}  // namespace fs

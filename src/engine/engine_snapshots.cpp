// Recurrent-state snapshots: taken at stride multiples while streams compute and handed to the prompt cache after
// their round, taken at a stream's end (finish or preemption), restored into a stream's slot when it resumes from a
// cached prefix; and taken after each row of a verify window, so the slot rolls back to the last kept row.
#include <algorithm>
#include <string>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/scheduler.h"
#include "engine/stream.h"
#include "models/kv_pool.h"
#include "models/model.h"

namespace fs {

bool Engine::cacheable_state(const Stream& s, int position) const {
  return chunks_.align == 1 || (position <= s.prompt_len && position % chunks_.align == 0);
}

void Engine::plan_state_snapshots(const std::vector<RoundItem>& items) {
  if (!state_slots_) return;
  const size_t floats = pool_->state_floats();
  const bool caching = cache_ && state_stride_ > 0;
  for (const auto& it : items) {
    Stream& s = *it.stream;
    drop_state_snapshots(s);
    // Window states reuse the stream's buffers of earlier rounds: each holds a whole recurrent state.
    for (auto& w : s.window_states) s.spare_states.push_back(std::move(w.state));
    s.window_states.clear();
    const int end = it.begin + it.count;
    s.window_end = it.drafted > 0 ? end : 0;
    std::vector<int> cached;
    if (caching)
      for (int p = (it.begin / state_stride_ + 1) * state_stride_; p <= end; p += state_stride_)
        if (cacheable_state(s, p)) cached.push_back(p);
    // A window of 1 + drafted rows may keep any first n of them: the state after each row but the last.
    for (int p = it.begin + 1; p <= end; ++p) {
      const bool for_cache = std::binary_search(cached.begin(), cached.end(), p);
      const bool for_window = it.drafted > 0 && p < end;
      if (!for_cache && !for_window) continue;
      if (for_cache && !for_window) {
        // Straight into pool pages when there is room (no trip through the host), else into host floats.
        s.snapshots.push_back({p, {}, take_snapshot_pages()});
        if (s.snapshots.back().pages.empty()) s.snapshots.back().state.resize(floats);
      } else if (for_cache) {
        s.snapshots.push_back({p, std::vector<float>(floats), {}});
      } else if (!s.spare_states.empty()) {
        s.window_states.push_back({p, std::move(s.spare_states.back())});
        s.spare_states.pop_back();
      } else {
        s.window_states.push_back({p, std::vector<float>(floats)});
      }
      StateSnapshot& snap = for_cache ? s.snapshots.back() : s.window_states.back();
      s.snapshot_targets.push_back({p, snap.pages.empty() ? snap.state.data() : nullptr, snap.pages});
    }
  }
}

std::vector<int32_t> Engine::take_snapshot_pages() {
  const int need = cache_->pages_per_snapshot();
  std::vector<int32_t> pages;
  if (need <= 0 || pool_->pages_free() < need) return pages;
  for (int i = 0; i < need; ++i) pages.push_back(*pool_->allocate());
  return pages;
}

void Engine::keep_state_snapshots(Stream& s) {
  // Only states of kept positions: a verify window's rejected rows leave nothing in the cache.
  if (cache_)
    for (const auto& snap : s.snapshots) {
      if (snap.position > s.computed) continue;
      const StateSource state = snap.pages.empty() ? StateSource(snap.state.data()) : StateSource::pages_of(snap.pages);
      cache_->insert(s.keys, snap.position, s.pages, state);
    }
  drop_state_snapshots(s);
}

void Engine::drop_state_snapshots(Stream& s) {
  for (const auto& snap : s.snapshots)
    pool_->release(snap.pages);
  s.snapshots.clear();
  s.snapshot_targets.clear();
}

const float* Engine::kept_window_state(const Stream& s) const {
  if (s.computed >= s.window_end) return nullptr;
  for (const auto* list : {&s.window_states, &s.snapshots})
    for (const auto& snap : *list)
      if (snap.position == s.computed && snap.pages.empty()) return snap.state.data();
  throw Error("stream " + std::to_string(s.id) + " has no state snapshot at its last kept row " +
              std::to_string(s.computed));
}

StateSource Engine::state_at_computed(const Stream& s, std::vector<float>& copy) const {
  if (const float* kept = kept_window_state(s)) {
    copy.assign(kept, kept + pool_->state_floats());
    return copy.data();
  }
  return StateSource::slot_of(s.state_slot);
}

void Engine::roll_back_state(Stream& s) {
  if (s.state_slot >= 0)
    if (const float* kept = kept_window_state(s)) model_.load_state(*pool_, s.state_slot, kept);
  s.window_end = 0;  // the window's buffers stay with the stream for its next window
}

void Engine::keep_in_cache(Stream& s) {
  if (!cache_) return;
  std::vector<float> copy;
  StateSource state;
  if (state_stride_ > 0 && s.state_slot >= 0 && s.computed > 0 && cacheable_state(s, s.computed))
    state = state_at_computed(s, copy);
  keep_state_snapshots(s);
  cache_->insert(s.keys, s.computed, s.pages, state);
}

void Engine::park_in_cache(Stream& s) {
  if (!cache_) return;
  if (state_stride_ == 0) {
    keep_in_cache(s);
    return;
  }
  std::vector<float> copy;
  StateSource state;
  if (s.state_slot >= 0 && s.computed > 0 && cacheable_state(s, s.computed)) state = state_at_computed(s, copy);
  keep_state_snapshots(s);
  // The pages first, then the state (the slot is still the stream's), which may take pages it has just given up.
  const int kept = cache_->insert(s.keys, s.computed, s.pages);
  pool_->release(s.pages);
  s.pages.clear();
  if (kept == s.computed && state) cache_->keep_state(s.keys, s.computed, state);
}

void Engine::restore_cached_state(Stream& s) {
  if (!state_slots_) return;
  if (s.computed > 0) {
    if (s.resume_state_pages.empty())
      throw Error("stream " + std::to_string(s.id) + " resumes at position " + std::to_string(s.computed) +
                  " without its recurrent state");
    model_.pages_to_state(*pool_, s.resume_state_pages, s.state_slot);
  }
  release_resume_state(s);
}

void Engine::release_resume_state(Stream& s) {
  pool_->release(s.resume_state_pages);
  s.resume_state_pages.clear();
}

}  // namespace fs

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

void Engine::plan_state_snapshots(const std::vector<RoundItem>& items) {
  if (!state_slots_) return;
  const size_t floats = pool_->state_floats();
  const bool caching = cache_ && state_stride_ > 0;
  for (const auto& it : items) {
    Stream& s = *it.stream;
    s.snapshots.clear();
    s.snapshot_targets.clear();
    // Window states reuse the stream's buffers of earlier rounds: each holds a whole recurrent state.
    for (auto& w : s.window_states) s.spare_states.push_back(std::move(w.state));
    s.window_states.clear();
    const int end = it.begin + it.count;
    s.window_end = it.drafted > 0 ? end : 0;
    std::vector<int> cached;
    if (caching)
      for (int p = (it.begin / state_stride_ + 1) * state_stride_; p <= end; p += state_stride_) cached.push_back(p);
    // A window of 1 + drafted rows may keep any first n of them: the state after each row but the last.
    for (int p = it.begin + 1; p <= end; ++p) {
      const bool for_cache = std::binary_search(cached.begin(), cached.end(), p);
      const bool for_window = it.drafted > 0 && p < end;
      if (!for_cache && !for_window) continue;
      if (for_cache) {
        s.snapshots.push_back({p, std::vector<float>(floats)});
      } else if (!s.spare_states.empty()) {
        s.window_states.push_back({p, std::move(s.spare_states.back())});
        s.spare_states.pop_back();
      } else {
        s.window_states.push_back({p, std::vector<float>(floats)});
      }
      StateSnapshot& snap = for_cache ? s.snapshots.back() : s.window_states.back();
      s.snapshot_targets.push_back({p, snap.state.data()});
    }
  }
}

void Engine::keep_state_snapshots(Stream& s) {
  // Only states of kept positions: a verify window's rejected rows leave nothing in the cache.
  if (cache_)
    for (const auto& snap : s.snapshots)
      if (snap.position <= s.computed) cache_->insert(s.keys, snap.position, s.pages, snap.state.data());
  s.snapshots.clear();
  s.snapshot_targets.clear();
}

const float* Engine::kept_window_state(const Stream& s) const {
  if (s.computed >= s.window_end) return nullptr;
  for (const auto* list : {&s.window_states, &s.snapshots})
    for (const auto& snap : *list)
      if (snap.position == s.computed) return snap.state.data();
  throw Error("stream " + std::to_string(s.id) + " has no state snapshot at its last kept row " +
              std::to_string(s.computed));
}

std::vector<float> Engine::state_at_computed(const Stream& s) {
  const size_t floats = pool_->state_floats();
  if (const float* kept = kept_window_state(s)) return std::vector<float>(kept, kept + floats);
  std::vector<float> state(floats);
  model_.save_state(*pool_, s.state_slot, state.data());
  return state;
}

void Engine::roll_back_state(Stream& s) {
  if (s.state_slot >= 0)
    if (const float* kept = kept_window_state(s)) model_.load_state(*pool_, s.state_slot, kept);
  s.window_end = 0;  // the window's buffers stay with the stream for its next window
}

void Engine::keep_in_cache(Stream& s) {
  if (!cache_) return;
  std::vector<float> state;
  if (state_stride_ > 0 && s.state_slot >= 0 && s.computed > 0) state = state_at_computed(s);
  keep_state_snapshots(s);
  cache_->insert(s.keys, s.computed, s.pages, state.empty() ? nullptr : state.data());
}

void Engine::park_in_cache(Stream& s) {
  if (!cache_) return;
  if (state_stride_ == 0) {
    keep_in_cache(s);
    return;
  }
  std::vector<float> state;
  if (s.state_slot >= 0 && s.computed > 0) state = state_at_computed(s);
  keep_state_snapshots(s);
  // The pages first, then the state, which may take pages the stream has just given up.
  const int kept = cache_->insert(s.keys, s.computed, s.pages);
  for (int32_t p : s.pages) pool_->release(p);
  s.pages.clear();
  if (kept == s.computed && !state.empty()) cache_->keep_state(s.keys, s.computed, state.data());
}

void Engine::restore_cached_state(Stream& s) {
  if (!state_slots_) return;
  if (s.computed > 0) {
    if (s.resume_state.size() != pool_->state_floats())
      throw Error("stream " + std::to_string(s.id) + " resumes at position " + std::to_string(s.computed) +
                  " without its recurrent state");
    model_.load_state(*pool_, s.state_slot, s.resume_state.data());
  }
  s.resume_state = {};
}

}  // namespace fs

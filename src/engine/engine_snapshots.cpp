// Recurrent-state snapshots for the prompt cache: taken at stride multiples while streams compute, handed to the
// cache after their round, taken at a stream's end (finish or preemption), and restored into a stream's slot when
// it resumes from a cached prefix.
#include <string>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/scheduler.h"
#include "engine/stream.h"
#include "models/kv_pool.h"
#include "models/model.h"

namespace fs {

void Engine::plan_state_snapshots(const std::vector<RoundItem>& items) {
  if (!cache_ || state_stride_ == 0) return;
  const size_t floats = pool_->state_floats();
  for (const auto& it : items) {
    Stream& s = *it.stream;
    s.snapshots.clear();
    s.snapshot_targets.clear();
    for (int p = (it.begin / state_stride_ + 1) * state_stride_; p <= it.begin + it.count; p += state_stride_)
      s.snapshots.push_back({p, std::vector<float>(floats)});
    for (auto& snap : s.snapshots) s.snapshot_targets.push_back({snap.position, snap.state.data()});
  }
}

void Engine::keep_state_snapshots(Stream& s) {
  if (cache_)
    for (const auto& snap : s.snapshots) cache_->insert(s.keys, snap.position, s.pages, snap.state.data());
  s.snapshots.clear();
  s.snapshot_targets.clear();
}

void Engine::keep_in_cache(Stream& s) {
  if (!cache_) return;
  keep_state_snapshots(s);
  std::vector<float> state;
  if (state_stride_ > 0 && s.state_slot >= 0 && s.computed > 0) {
    state.resize(pool_->state_floats());
    model_.save_state(*pool_, s.state_slot, state.data());
  }
  cache_->insert(s.keys, s.computed, s.pages, state.empty() ? nullptr : state.data());
}

void Engine::park_in_cache(Stream& s) {
  if (!cache_) return;
  if (state_stride_ == 0) {
    keep_in_cache(s);
    return;
  }
  keep_state_snapshots(s);
  std::vector<float> state;
  if (s.state_slot >= 0 && s.computed > 0) {
    state.resize(pool_->state_floats());
    model_.save_state(*pool_, s.state_slot, state.data());
  }
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

#pragma once
// One request's state inside the engine: its tokens, its KV page table, its sampling state.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "models/model.h"

namespace fs {

struct Stream {
  uint64_t id = 0;
  GenerationRequest request;
  std::shared_ptr<StreamHandle> handle;
  std::vector<int32_t> tokens;  // prompt, then generated ids
  std::vector<uint64_t> keys;   // prompt-cache key of every token
  int prompt_len = 0;
  int computed = 0;             // positions whose K/V are in the pages
  int cached = 0;               // prompt positions adopted from the prompt cache at the first admission
  std::vector<int32_t> pages;
  int32_t state_slot = -1;      // recurrent-state slot while admitted (models with recurrent layers)
  // The snapshot pages of the state at `computed` adopted from the prompt cache (retained), until a slot holds it.
  std::vector<int32_t> resume_state_pages;
  std::vector<StateSnapshot> snapshots;  // states this round's chunk takes for the prompt cache
  std::vector<StateSnapshot> window_states;  // states after each verify-window row but the last, to roll back to
  std::vector<std::vector<float>> spare_states;  // buffers of earlier windows, reused by the next
  std::vector<StateSnapshotTarget> snapshot_targets;  // where the forward pass writes both kinds
  int window_end = 0;           // this round's verify window ends here: the slot's state is past rejected rows until
                                // roll_back_state (0 → no window)
  uint64_t seed = 0;
  TokenCounts counts;
  int generated = 0;
  bool finished = false;
  bool admitted = false;        // admitted at least once (a preempted stream resumes with its first `cached`)
  bool preempted = false;       // sent back to the queue this round, to resume from nothing computed
  std::vector<int32_t> draft;   // this round's draft tokens after the pending one (speculative decoding)
  std::vector<int32_t> draft_parents;  // a draft tree: each draft token's parent among them (-1: the pending
                                       // token); empty → the draft is a chain
  std::vector<int32_t> window;  // the verify window's tokens: the pending one then the draft
  std::vector<int32_t> window_parents;  // a tree window's row parents (SequenceChunk::row_parents)
  int drafted = 0;              // draft tokens verified so far
  int accepted = 0;             // of them, those kept

  bool prefilling() const { return computed < int(tokens.size()) - 1 || generated == 0; }
  int pending() const { return int(tokens.size()) - computed; }
  void drop_draft() {
    draft.clear();
    draft_parents.clear();
  }
};

}  // namespace fs

// Speculative decoding in the engine: drafts asked for per round, verify windows accepted token by token through
// the same accept_token as undrafted rows, so a reply is the same bits with or without a drafter.
#include <algorithm>
#include <cstdio>

#include "engine/drafters/drafter.h"
#include "engine/engine.h"
#include "engine/scheduler.h"
#include "engine/stream.h"
#include "models/kv_pool.h"
#include "models/model.h"

namespace fs {

int Engine::draft_allowance(const Stream& s) const {
  if (!options_.drafter || options_.draft_tokens <= 0 || state_slots_) return 0;
  if (!decoding(s) || !s.request.allow_draft || s.request.constraint) return 0;
  // The window yields at most 1 + drafted tokens, and its last row sits at position tokens.size() - 1 + drafted.
  const int by_reply = s.request.max_tokens - s.generated - 1;
  const int by_positions = stream_positions_ - int(s.tokens.size()) - 1;
  return std::max(0, std::min({options_.draft_tokens, by_reply, by_positions}));
}

void Engine::draft(const std::vector<Stream*>& order) {
  std::vector<DraftRequest> requests;
  std::vector<Stream*> asking;
  for (Stream* s : order) {
    s->draft.clear();
    const int k = draft_allowance(*s);
    if (k <= 0) continue;
    requests.push_back({s->id, s->tokens, k});
    asking.push_back(s);
  }
  if (requests.empty()) return;
  std::vector<std::vector<int32_t>> guesses;
  try {
    guesses = options_.drafter->propose(requests);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "foldserve: drafter %s failed, this round runs undrafted: %s\n", options_.drafter->name(),
                 e.what());
    return;
  }
  for (size_t i = 0; i < asking.size() && i < guesses.size(); ++i) {
    auto& g = guesses[i];
    const int32_t V = model_.config().vocab_size;
    // A guess outside the vocabulary ends the draft there; a drafter never decides what the target keeps.
    auto bad = std::find_if(g.begin(), g.end(), [V](int32_t id) { return id < 0 || id >= V; });
    g.erase(bad, g.end());
    if (int(g.size()) > requests[i].max_tokens) g.resize(size_t(requests[i].max_tokens));
    asking[i]->draft = std::move(g);
  }
}

void Engine::accept_window(Stream& s, const RoundItem& it, SampledForward& out, size_t& row,
                           size_t& logit_row) {
  const size_t V = size_t(model_.config().vocab_size);
  const int rows = 1 + it.drafted;
  // Where each row's id and logits lie; rows past the first mismatch are read by nobody.
  std::vector<size_t> logit_at(static_cast<size_t>(rows), 0);
  for (int j = 0; j < rows; ++j) logit_at[size_t(j)] = out.ids[row + size_t(j)] < 0 ? logit_row++ : 0;
  const size_t first = row;
  row += size_t(rows);
  int accepted = 0;
  for (int j = 0; j < rows; ++j) {
    // Row j's input is kept: the pending token, or a draft token equal to the one row j - 1 chose.
    s.computed = it.begin + j + 1;
    const int32_t picked = out.ids[first + size_t(j)];
    std::span<float> l;
    if (picked < 0) l = std::span<float>(out.logits.data() + logit_at[size_t(j)] * V, V);
    const int32_t chosen = accept_token(s, picked, l);
    if (j == it.drafted || chosen != s.draft[size_t(j)]) break;
    ++accepted;
    if (s.finished) break;
  }
  s.drafted += it.drafted;
  s.accepted += accepted;
  s.draft.clear();
  s.window.clear();
  {
    std::lock_guard lock(mu_);
    ++stats_.draft_windows;
    stats_.drafted_tokens += uint64_t(it.drafted);
    stats_.accepted_tokens += uint64_t(accepted);
  }
  if (s.finished) return;
  // Pages that hold only rejected rows go back; the next row (the pending token) needs tokens.size() positions.
  const int P = pool_->page_tokens();
  const size_t keep = size_t((int(s.tokens.size()) + P - 1) / P);
  while (s.pages.size() > keep) {
    pool_->release(s.pages.back());
    s.pages.pop_back();
  }
}

}  // namespace fs

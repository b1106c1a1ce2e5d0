// Speculative decoding in the engine: drafts (chains or trees) asked for per round, verify windows accepted token by
// token through the same accept_token as undrafted rows, so a reply is the same bits with or without a drafter.
#include <algorithm>
#include <cstdio>
#include <limits>

#include "engine/drafters/drafter.h"
#include "engine/engine.h"
#include "engine/row_sampling.h"
#include "engine/scheduler.h"
#include "engine/stream.h"
#include "models/kv_pool.h"
#include "models/model.h"

namespace fs {

int Engine::draft_allowance(const Stream& s) const {
  if (!options_.drafter || options_.draft_tokens <= 0) return 0;
  if (!decoding(s) || !s.request.allow_draft || s.request.constraint) return 0;
  // The window yields at most 1 + its depth tokens, and its last row sits at slot tokens.size() - 1 + its rows.
  const int by_reply = s.request.max_tokens - s.generated - 1;
  const int by_positions = stream_positions_ - int(s.tokens.size()) - 1;
  return std::max(0, std::min({options_.draft_tokens, by_reply, by_positions}));
}

void Engine::fit_tree(DraftTree& t, int32_t vocab, int depth, int nodes) {
  std::vector<int> level;
  size_t n = 0;
  for (; n < t.tokens.size() && n < t.parents.size() && int(n) < nodes; ++n) {
    // A node outside the vocabulary, with a later parent or too deep ends the tree there.
    const int32_t id = t.tokens[n], parent = t.parents[n];
    if (id < 0 || id >= vocab || parent < -1 || parent >= int32_t(n)) break;
    const int d = parent < 0 ? 1 : level[size_t(parent)] + 1;
    if (d > depth) break;
    level.push_back(d);
  }
  t.tokens.resize(n);
  t.parents.resize(n);
}

int Engine::undrafted_round_rows(const std::vector<Stream*>& order) const {
  long long rows = 0;
  for (const Stream* s : order) rows += next_chunk_length(*s, chunks_);
  return int(std::min<long long>(rows, options_.round_tokens));
}

void Engine::draft(const std::vector<Stream*>& order) {
  std::vector<DraftRequest> requests;
  std::vector<Stream*> asking;
  std::vector<int> nodes;  // per asking stream: the most drafted rows (tree nodes) it may verify
  // Drafted rows the round may still take under draft_round_rows.
  const int cap = options_.draft_round_rows, width = std::max(1, options_.draft_tree);
  int room = cap > 0 ? std::max(0, cap - undrafted_round_rows(order)) : std::numeric_limits<int>::max();
  for (Stream* s : order) {
    s->drop_draft();
    const int depth = draft_allowance(*s);
    const int rows = int(std::min<long long>(room, (long long)depth * width));
    if (std::min(depth, rows) <= 0) continue;
    room -= rows;
    requests.push_back({s->id, s->tokens, std::min(depth, rows), options_.draft_tree});
    asking.push_back(s);
    nodes.push_back(rows);
  }
  if (requests.empty()) return;
  std::vector<DraftTree> guesses;
  try {
    guesses = options_.drafter->propose_trees(requests);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "foldserve: drafter %s failed, this round runs undrafted: %s\n", options_.drafter->name(),
                 e.what());
    return;
  }
  for (size_t i = 0; i < asking.size() && i < guesses.size(); ++i) {
    DraftTree& g = guesses[i];
    Stream& s = *asking[i];
    // A drafter never decides what the target keeps: a tree's rows fit the stream's positions, its depth the bound.
    const int by_positions = stream_positions_ - int(s.tokens.size()) - 1;
    fit_tree(g, model_.config().vocab_size, requests[i].max_tokens, std::min(nodes[i], by_positions));
    bool chain = true;
    for (size_t j = 0; j < g.parents.size(); ++j) chain = chain && g.parents[j] == int32_t(j) - 1;
    s.draft = std::move(g.tokens);
    if (!chain) s.draft_parents = std::move(g.parents);
  }
}

void Engine::move_tree_row(Stream& s, int from, int to) {
  if (from != to) model_.move_kv_row(*pool_, s.pages, from, to);
}

void Engine::accept_window(Stream& s, const RoundItem& it, SampledForward& out, size_t& row,
                           size_t& logit_row) {
  const size_t V = size_t(model_.config().vocab_size);
  const int rows = 1 + it.drafted;
  // Where each row's id and logits lie; rows off the accepted path are read by nobody.
  std::vector<size_t> logit_at(static_cast<size_t>(rows), 0);
  for (int j = 0; j < rows; ++j) logit_at[size_t(j)] = out.ids[row + size_t(j)] < 0 ? logit_row++ : 0;
  const size_t first = row;
  row += size_t(rows);
  // Row r's parent row: the pending token's row 0 for a first-level draft token; a chain's row r - 1.
  auto parent_row = [&](int r) { return s.draft_parents.empty() ? r - 1 : s.draft_parents[size_t(r - 1)] + 1; };
  int accepted = 0;
  for (int r = 0, depth = 0;; ++depth) {
    // Row r's input is kept: the pending token, or a draft token equal to the one its parent row chose. Its K/V
    // goes where the chain row at its depth would have put it, before the stream can finish and cache its pages.
    move_tree_row(s, it.begin + r, it.begin + depth);
    s.computed = it.begin + depth + 1;
    const int32_t picked = out.ids[first + size_t(r)];
    std::span<float> l;
    if (picked < 0) l = std::span<float>(out.logits.data() + logit_at[size_t(r)] * V, V);
    const auto device = picked_with_logprobs(out, first + size_t(r));
    const int32_t chosen = accept_token(s, picked, l, device ? &*device : nullptr);
    // The child of row r drafting the chosen token, if any (rows come after their parents).
    int next = -1;
    for (int c = r + 1; c < rows && next < 0; ++c)
      if (parent_row(c) == r && s.draft[size_t(c - 1)] == chosen) next = c;
    if (next < 0) break;
    ++accepted;
    if (s.finished) break;
    r = next;
  }
  s.drafted += it.drafted;
  s.accepted += accepted;
  s.drop_draft();
  s.window.clear();
  s.window_parents.clear();
  {
    std::lock_guard lock(mu_);
    ++stats_.draft_windows;
    stats_.drafted_tokens += uint64_t(it.drafted);
    stats_.accepted_tokens += uint64_t(accepted);
  }
  if (s.finished) return;
  roll_back_state(s);
  // Pages that hold only rejected rows go back; the next row (the pending token) needs tokens.size() positions.
  const int P = pool_->page_tokens();
  const size_t keep = size_t((int(s.tokens.size()) + P - 1) / P);
  while (s.pages.size() > keep) {
    pool_->release(s.pages.back());
    s.pages.pop_back();
  }
}

}  // namespace fs

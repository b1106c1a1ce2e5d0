#pragma once
// Plans one scheduler round: every decoding stream's next row, then prefill chunks in arrival order, within the
// round's row budget.
#include <vector>

#include "engine/chunk_rule.h"
#include "engine/stream.h"

namespace fs {

struct RoundItem {
  Stream* stream;
  int begin;         // first position of the chunk
  int count;         // tokens in the chunk
  bool samples;      // the chunk ends at the stream's last token, so a new token is sampled
  int drafted = 0;   // draft tokens after the pending one: a verify window of 1 + drafted rows, each with logits
};

// Positions of the stream's next chunk without a round budget: one decode row, or its pending positions up to the
// rule's length, never across the end of the prompt (a prompt's M-RoPE positions and image features stop there),
// aligned as the rule says. A round's budget only shortens it.
int next_chunk_length(const Stream& s, ChunkRule rule);
// `n` positions from the stream's next one, cut back so a prompt chunk ends at a multiple of `align` or at the
// prompt's end (Model::prompt_alignment), or taken up to the next such end when shorter.
int aligned_chunk_length(const Stream& s, int n, int align);
// Whether the stream's next row is a decode row (its only pending token is the last one it sampled).
inline bool decoding(const Stream& s) { return s.pending() == 1 && s.generated > 0; }

// `streams` in arrival order. Decode rows come first (one each, plus the stream's draft tokens as a verify window),
// then prefill chunks cut by `rule` until `round_tokens` rows are planned; a round always makes progress when any
// stream has work. With `hold_decode` the decode rows wait for a round without prompt work.
std::vector<RoundItem> plan_round(const std::vector<Stream*>& streams, ChunkRule rule, int round_tokens,
                                  bool hold_decode = false);
// Whether any of `streams` has prompt positions (or positions recomputed after a preemption) still to compute.
bool prompt_work_left(const std::vector<Stream*>& streams);

}  // namespace fs

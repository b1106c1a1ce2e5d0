#pragma once
// Plans one scheduler round: every decoding stream's next row, then prefill chunks in arrival order, within the
// round's row budget.
#include <vector>

#include "engine/stream.h"

namespace fs {

struct RoundItem {
  Stream* stream;
  int begin;         // first position of the chunk
  int count;         // tokens in the chunk
  bool samples;      // the chunk ends at the stream's last token, so a new token is sampled
  int drafted = 0;   // draft tokens after the pending one: a verify window of 1 + drafted rows, each with logits
};

// Positions of the stream's next chunk without a round budget: one decode row, or its pending positions up to
// `prefill_chunk`, never across the end of the prompt (a prompt's M-RoPE positions and image features stop there),
// aligned as aligned_chunk_length says. A round's budget only shortens it.
int next_chunk_length(const Stream& s, int prefill_chunk, int align = 1);
// `n` positions from the stream's next one, cut back so a prompt chunk ends at a multiple of `align` or at the
// prompt's end (Model::prompt_alignment), or taken up to the next such end when shorter.
int aligned_chunk_length(const Stream& s, int n, int align);
// Whether the stream's next row is a decode row (its only pending token is the last one it sampled).
inline bool decoding(const Stream& s) { return s.pending() == 1 && s.generated > 0; }

// `streams` in arrival order. Decode rows come first (one each, plus the stream's draft tokens as a verify window),
// then prefill chunks of at most `prefill_chunk` until `round_tokens` rows are planned; a round always makes progress
// when any stream has work. With `hold_decode` the decode rows wait for a round without prompt work. Prompt chunks
// are aligned to `align` as aligned_chunk_length says.
std::vector<RoundItem> plan_round(const std::vector<Stream*>& streams, int prefill_chunk, int round_tokens,
                                  bool hold_decode = false, int align = 1);
// Whether any of `streams` has prompt positions (or positions recomputed after a preemption) still to compute.
bool prompt_work_left(const std::vector<Stream*>& streams);

}  // namespace fs

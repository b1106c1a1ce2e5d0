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
};

// `streams` in arrival order. Decode rows come first (one each), then prefill chunks of at most `prefill_chunk`
// until `round_tokens` rows are planned; a round always makes progress when any stream has work.
std::vector<RoundItem> plan_round(const std::vector<Stream*>& streams, int prefill_chunk, int round_tokens);

}  // namespace fs

#include "engine/scheduler.h"

#include <algorithm>

namespace fs {

int aligned_chunk_length(const Stream& s, int n, int align) {
  if (align <= 1 || s.computed >= s.prompt_len) return n;
  const int end = s.computed + n;
  if (end >= s.prompt_len) return s.prompt_len - s.computed;
  const int aligned = end / align * align;
  if (aligned > s.computed) return aligned - s.computed;
  return std::min((s.computed / align + 1) * align, s.prompt_len) - s.computed;
}

int next_chunk_length(const Stream& s, ChunkRule rule) {
  if (decoding(s)) return 1;
  int n = std::min(s.pending(), rule.length);
  if (s.computed < s.prompt_len) n = std::min(n, s.prompt_len - s.computed);
  return aligned_chunk_length(s, n, rule.align);
}

bool prompt_work_left(const std::vector<Stream*>& streams) {
  return std::any_of(streams.begin(), streams.end(), [](const Stream* s) { return s->pending() > 0 && !decoding(*s); });
}

std::vector<RoundItem> plan_round(const std::vector<Stream*>& streams, ChunkRule rule, int round_tokens,
                                  bool hold_decode) {
  std::vector<RoundItem> items;
  int budget = round_tokens;
  const bool held = hold_decode && prompt_work_left(streams);
  for (Stream* s : streams) {
    if (decoding(*s) && !held) {
      const int drafted = int(s->draft.size());
      items.push_back({s, s->computed, 1 + drafted, true, drafted});
      budget -= 1 + drafted;
    }
  }
  for (Stream* s : streams) {
    if (s->pending() <= 0 || decoding(*s)) continue;
    if (budget <= 0 && !items.empty()) break;
    const int unbudgeted = next_chunk_length(*s, rule);
    const int n = aligned_chunk_length(*s, std::min(unbudgeted, std::max(budget, 1)), rule.align);
    items.push_back({s, s->computed, n, n == s->pending()});
    budget -= n;
  }
  return items;
}

}  // namespace fs

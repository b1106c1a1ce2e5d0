#include "engine/scheduler.h"

#include <algorithm>

namespace fs {

std::vector<RoundItem> plan_round(const std::vector<Stream*>& streams, int prefill_chunk, int round_tokens) {
  std::vector<RoundItem> items;
  int budget = round_tokens;
  for (Stream* s : streams) {
    if (s->pending() == 1 && s->generated > 0) {
      items.push_back({s, s->computed, 1, true});
      --budget;
    }
  }
  for (Stream* s : streams) {
    if (s->pending() <= 0 || (s->pending() == 1 && s->generated > 0)) continue;
    if (budget <= 0 && !items.empty()) break;
    int n = std::min({s->pending(), prefill_chunk, std::max(budget, 1)});
    items.push_back({s, s->computed, n, n == s->pending()});
    budget -= n;
  }
  return items;
}

}  // namespace fs

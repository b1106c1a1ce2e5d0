#include "engine/drafters/ngram_drafter.h"

#include <algorithm>

#include "core/error.h"

namespace fs {

NgramDrafter::NgramDrafter(int min_ngram, int max_ngram) : min_ngram_(min_ngram), max_ngram_(max_ngram) {
  if (min_ngram_ < 1 || max_ngram_ < min_ngram_) throw Error("n-gram drafting needs 1 <= min n <= max n");
}

std::vector<int32_t> prompt_lookup(std::span<const int32_t> tokens, int min_ngram, int max_ngram, int k) {
  const int n_tokens = int(tokens.size());
  if (k <= 0) return {};
  for (int n = std::min(max_ngram, n_tokens - 1); n >= min_ngram; --n) {
    auto suffix = tokens.subspan(size_t(n_tokens - n));
    // Most recent earlier start first; a match must leave at least one token after it.
    for (int start = n_tokens - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int from = start + n, count = std::min(k, n_tokens - from);
      return {tokens.begin() + from, tokens.begin() + from + count};
    }
  }
  return {};
}

std::vector<std::vector<int32_t>> NgramDrafter::propose(std::span<const DraftRequest> requests) {
  std::vector<std::vector<int32_t>> out;
  out.reserve(requests.size());
  for (const auto& r : requests) out.push_back(prompt_lookup(r.tokens, min_ngram_, max_ngram_, r.max_tokens));
  return out;
}

}  // namespace fs

#include "engine/drafters/ngram_drafter.h"

#include <algorithm>

#include "core/error.h"

namespace fs {

NgramDrafter::NgramDrafter(int min_ngram, int max_ngram) : min_ngram_(min_ngram), max_ngram_(max_ngram) {
  if (min_ngram_ < 1 || max_ngram_ < min_ngram_) throw Error("n-gram drafting needs 1 <= min n <= max n");
}

std::vector<std::vector<int32_t>> prompt_lookups(std::span<const int32_t> tokens, int min_ngram, int max_ngram, int k,
                                                 int count) {
  const int n_tokens = int(tokens.size());
  std::vector<std::vector<int32_t>> found;
  if (k <= 0 || count <= 0) return found;
  for (int n = std::min(max_ngram, n_tokens - 1); n >= min_ngram; --n) {
    auto suffix = tokens.subspan(size_t(n_tokens - n));
    // Most recent earlier start first; a match must leave at least one token after it.
    for (int start = n_tokens - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int from = start + n, length = std::min(k, n_tokens - from);
      std::vector<int32_t> next(tokens.begin() + from, tokens.begin() + from + length);
      if (std::find(found.begin(), found.end(), next) != found.end()) continue;
      found.push_back(std::move(next));
      if (int(found.size()) == count) return found;
    }
  }
  return found;
}

std::vector<int32_t> prompt_lookup(std::span<const int32_t> tokens, int min_ngram, int max_ngram, int k) {
  auto found = prompt_lookups(tokens, min_ngram, max_ngram, k, 1);
  return found.empty() ? std::vector<int32_t>{} : std::move(found[0]);
}

DraftTree merge_continuations(const std::vector<std::vector<int32_t>>& continuations) {
  DraftTree t;
  for (const auto& c : continuations) {
    int32_t at = -1;  // the node the continuation has reached, -1 → the stream's last token
    for (int32_t id : c) {
      int32_t child = -1;
      for (size_t i = 0; i < t.tokens.size() && child < 0; ++i)
        if (t.parents[i] == at && t.tokens[i] == id) child = int32_t(i);
      if (child < 0) {
        child = int32_t(t.tokens.size());
        t.tokens.push_back(id);
        t.parents.push_back(at);
      }
      at = child;
    }
  }
  return t;
}

std::vector<std::vector<int32_t>> NgramDrafter::propose(std::span<const DraftRequest> requests) {
  std::vector<std::vector<int32_t>> out;
  out.reserve(requests.size());
  for (const auto& r : requests) out.push_back(prompt_lookup(r.tokens, min_ngram_, max_ngram_, r.max_tokens));
  return out;
}

std::vector<DraftTree> NgramDrafter::propose_trees(std::span<const DraftRequest> requests) {
  std::vector<DraftTree> out;
  out.reserve(requests.size());
  for (const auto& r : requests)
    out.push_back(merge_continuations(prompt_lookups(r.tokens, min_ngram_, max_ngram_, r.max_tokens, r.width)));
  return out;
}

}  // namespace fs

#pragma once
// Prompt-lookup drafting: the stream's latest n tokens (n from max_ngram down to min_ngram) are searched for in its
// own earlier tokens, and the tokens that followed the most recent earlier match are proposed; a tree of width W
// merges the continuations of the W most recent matches with different continuations (longest n first). No model,
// no state.
#include "engine/drafters/drafter.h"

namespace fs {

class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(int min_ngram = 2, int max_ngram = 4);
  const char* name() const override { return "ngram"; }
  std::vector<std::vector<int32_t>> propose(std::span<const DraftRequest> requests) override;
  std::vector<DraftTree> propose_trees(std::span<const DraftRequest> requests) override;

 private:
  int min_ngram_, max_ngram_;
};

// The tokens after the most recent earlier occurrence of `tokens`' longest suffix of min..max tokens, at most `k`.
std::vector<int32_t> prompt_lookup(std::span<const int32_t> tokens, int min_ngram, int max_ngram, int k);

// Up to `count` different continuations of at most `k` tokens: longest suffix first, most recent match first.
std::vector<std::vector<int32_t>> prompt_lookups(std::span<const int32_t> tokens, int min_ngram, int max_ngram, int k,
                                                 int count);

// The continuations merged into one tree (shared prefixes once), in order: the first continuation is a chain.
DraftTree merge_continuations(const std::vector<std::vector<int32_t>>& continuations);

}  // namespace fs

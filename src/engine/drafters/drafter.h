#pragma once
// A proposer of draft tokens for speculative decoding: given each stream's tokens so far it guesses the next few.
// The engine verifies every guess against the target model, so a drafter only changes speed, never a reply.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace fs {

struct DraftRequest {
  uint64_t stream = 0;                // the engine's stream id, stable across rounds and preemptions
  std::span<const int32_t> tokens;    // prompt then reply: every token the stream has kept
  int max_tokens = 0;                 // most tokens to propose (a tree: its most depth)
  int width = 1;                      // a tree's most choices per depth (propose_trees); 1 → a chain
};

// A draft tree: tokens ordered so that each one's parent comes before it; parents[i] is the index of token i's
// parent among `tokens`, -1 → it follows the stream's last token. A chain has parents i - 1.
struct DraftTree {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;
};

// Memory a drafter takes beside the target, for the server's budget: host bytes it touches only as streams draft
// (counted against RAM) and device bytes it already holds (reported beside the target's weights).
struct DrafterMemory {
  size_t host_to_come = 0;
  size_t device_resident = 0;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // "ngram" or the draft model's folder name.
  virtual const char* name() const = 0;
  // Up to request.max_tokens guesses per request, in order; an empty guess is allowed.
  virtual std::vector<std::vector<int32_t>> propose(std::span<const DraftRequest> requests) = 0;
  // A tree per request, at most request.max_tokens deep with at most request.width nodes per depth; a drafter
  // without trees proposes its chains.
  virtual std::vector<DraftTree> propose_trees(std::span<const DraftRequest> requests) {
    std::vector<DraftTree> trees;
    for (auto& chain : propose(requests)) {
      DraftTree t{std::move(chain), {}};
      for (size_t i = 0; i < t.tokens.size(); ++i) t.parents.push_back(int32_t(i) - 1);
      trees.push_back(std::move(t));
    }
    return trees;
  }
  // The stream has ended: drop whatever the drafter keeps for it.
  virtual void forget(uint64_t stream) {}
  virtual DrafterMemory memory() const { return {}; }
};

}  // namespace fs

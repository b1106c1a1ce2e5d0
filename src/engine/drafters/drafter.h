#pragma once
// A proposer of draft tokens for speculative decoding: given each stream's tokens so far it guesses the next few.
// The engine verifies every guess against the target model, so a drafter only changes speed, never a reply.
#include <cstdint>
#include <span>
#include <vector>

namespace fs {

struct DraftRequest {
  uint64_t stream = 0;                // the engine's stream id, stable across rounds and preemptions
  std::span<const int32_t> tokens;    // prompt then reply: every token the stream has kept
  int max_tokens = 0;                 // most tokens to propose
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // "ngram" or the draft model's folder name.
  virtual const char* name() const = 0;
  // Up to request.max_tokens guesses per request, in order; an empty guess is allowed.
  virtual std::vector<std::vector<int32_t>> propose(std::span<const DraftRequest> requests) = 0;
  // The stream has ended: drop whatever the drafter keeps for it.
  virtual void forget(uint64_t stream) {}
};

}  // namespace fs

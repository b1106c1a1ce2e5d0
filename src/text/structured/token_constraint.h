#pragma once
// Token-level enforcement of a byte grammar: CompiledConstraint holds the grammar's automaton and, per automaton
// state, the mask of tokens whose bytes it accepts (computed once by walking the vocabulary trie, then reused by
// every stream); TokenConstraint is one stream's position in it, advanced only by the tokens it accepts.
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "text/structured/byte_automaton.h"
#include "text/structured/token_vocab.h"

namespace fs::structured {

struct ConstraintLimits {
  int max_stack_depth = 128;      // grammar nesting (bounds recursive schemas and JSON depth)
  size_t max_states = 200000;     // automaton states
  size_t max_cached_masks = 4096; // masks remembered per compiled constraint
};

class CompiledConstraint {
 public:
  CompiledConstraint(Grammar grammar, std::shared_ptr<const TokenVocab> vocab, ConstraintLimits limits = {});
  // Allowed-token bits of `state` (bit id set → the token's bytes are accepted); vocab.size() bits.
  std::shared_ptr<const std::vector<uint64_t>> mask(int32_t state);
  // The state after the token's bytes (kDead when refused).
  int32_t advance(int32_t state, int32_t token);
  bool accepting(int32_t state);
  // Whether any byte may follow `state`.
  bool extensible(int32_t state);
  const TokenVocab& vocab() const { return *vocab_; }
  size_t automaton_states();

 private:
  std::vector<uint64_t> walk(int32_t state);
  std::mutex mu_;
  std::shared_ptr<const TokenVocab> vocab_;
  ByteAutomaton automaton_;
  ConstraintLimits limits_;
  std::unordered_map<int32_t, std::shared_ptr<const std::vector<uint64_t>>> masks_;
};

class TokenConstraint {
 public:
  explicit TokenConstraint(std::shared_ptr<CompiledConstraint> compiled) : c_(std::move(compiled)) {}
  // Sets every logit the constraint forbids now to -infinity, leaving the others untouched. Eos ids are allowed
  // only where the grammar may end. Returns how many tokens remain allowed.
  size_t mask(std::span<float> logits, std::span<const int32_t> eos_ids);
  // Advances by a sampled token; false (state unchanged) when the token was not allowed.
  bool accept(int32_t id);
  // The reply so far is a whole sentence of the grammar.
  bool complete() { return c_->accepting(state_); }
  int32_t state() const { return state_; }

 private:
  std::shared_ptr<CompiledConstraint> c_;
  int32_t state_ = 0;
};

}  // namespace fs::structured

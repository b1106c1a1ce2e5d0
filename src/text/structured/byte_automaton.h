#pragma once
// Runs a Grammar over bytes as a lazily built DFA: a state is the set of parse stacks (positions in the grammar's
// code) reachable after the bytes read so far; states are interned and each (state, byte) transition is computed
// once and remembered. Stacks deeper than a limit are dropped, which bounds nesting. Not thread-safe: the owner locks.
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/structured/grammar.h"

namespace fs::structured {

class ByteAutomaton {
 public:
  static constexpr int32_t kDead = -1;

  ByteAutomaton(Grammar grammar, int max_stack_depth, size_t max_states);
  int32_t start() const { return 0; }
  // The state after `byte`, or kDead. Throws fs::Error when the grammar needs more than max_states states.
  int32_t next(int32_t state, uint8_t byte) {
    int32_t t = trans_[size_t(state)][byte];
    return t != kUnknown ? t : compute(state, byte);
  }
  // The input so far is a whole sentence of the grammar.
  bool accepting(int32_t state) const { return accepting_[size_t(state)]; }
  size_t states() const { return stacks_.size(); }

 private:
  static constexpr int32_t kUnknown = -2;
  using Stack = std::vector<uint32_t>;
  int32_t compute(int32_t state, uint8_t byte);
  // Adds to `out` every stack reachable from `stack` without reading a byte whose top is a byte set (or empty).
  void close(Stack stack, std::vector<Stack>& out, std::vector<Stack>& seen) const;
  int32_t intern(std::vector<Stack> set);

  Grammar g_;
  int max_depth_;
  size_t max_states_;
  std::vector<std::vector<Stack>> stacks_;
  std::vector<char> accepting_;
  std::vector<std::array<int32_t, 256>> trans_;
  std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace fs::structured

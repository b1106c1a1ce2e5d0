#include "text/structured/byte_automaton.h"

#include <algorithm>

#include "core/error.h"

namespace fs::structured {

ByteAutomaton::ByteAutomaton(Grammar grammar, int max_stack_depth, size_t max_states)
    : g_(std::move(grammar)), max_depth_(max_stack_depth), max_states_(max_states) {
  std::vector<Stack> start, seen;
  for (uint32_t alt : g_.rule_alts[g_.root]) close(Stack{alt}, start, seen);
  intern(std::move(start));
}

void ByteAutomaton::close(Stack stack, std::vector<Stack>& out, std::vector<Stack>& seen) const {
  while (!stack.empty() && g_.code[stack.back()].kind == Grammar::End) stack.pop_back();
  if (int(stack.size()) > max_depth_) return;
  if (std::find(seen.begin(), seen.end(), stack) != seen.end()) return;
  seen.push_back(stack);
  if (stack.empty() || g_.code[stack.back()].kind == Grammar::Set) {
    out.push_back(std::move(stack));
    return;
  }
  // A rule reference: continue after it (unless that is the end: a tail call), inside each alternative.
  const uint32_t pos = stack.back();
  stack.pop_back();
  if (g_.code[pos + 1].kind != Grammar::End) stack.push_back(pos + 1);
  for (uint32_t alt : g_.rule_alts[g_.code[pos].arg]) {
    Stack s = stack;
    s.push_back(alt);
    close(std::move(s), out, seen);
  }
}

int32_t ByteAutomaton::intern(std::vector<Stack> set) {
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  std::string key;
  for (const Stack& s : set) {
    key.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(uint32_t));
    key.append(4, '\xff');
  }
  auto [it, fresh] = ids_.emplace(std::move(key), int32_t(stacks_.size()));
  if (!fresh) return it->second;
  if (stacks_.size() >= max_states_)
    throw Error("the constraint needs more than " + std::to_string(max_states_) + " automaton states");
  bool accept = std::any_of(set.begin(), set.end(), [](const Stack& s) { return s.empty(); });
  stacks_.push_back(std::move(set));
  accepting_.push_back(accept);
  trans_.emplace_back();
  trans_.back().fill(kUnknown);
  return it->second;
}

int32_t ByteAutomaton::compute(int32_t state, uint8_t byte) {
  std::vector<Stack> next, seen;
  for (const Stack& s : stacks_[size_t(state)]) {
    if (s.empty() || !g_.sets[g_.code[s.back()].arg].has(byte)) continue;
    Stack moved = s;
    ++moved.back();
    close(std::move(moved), next, seen);
  }
  int32_t id = next.empty() ? kDead : intern(std::move(next));
  trans_[size_t(state)][byte] = id;
  return id;
}

}  // namespace fs::structured

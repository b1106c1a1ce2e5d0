#include "text/structured/token_constraint.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace fs::structured {

CompiledConstraint::CompiledConstraint(Grammar grammar, std::shared_ptr<const TokenVocab> vocab,
                                       ConstraintLimits limits)
    : vocab_(std::move(vocab)), automaton_(std::move(grammar), limits.max_stack_depth, limits.max_states),
      limits_(limits) {}

std::vector<uint64_t> CompiledConstraint::walk(int32_t state) {
  const TokenVocab& v = *vocab_;
  std::vector<uint64_t> bits((size_t(v.size()) + 63) / 64, 0);
  std::vector<int32_t> at_depth(size_t(v.max_depth) + 1);
  at_depth[0] = state;
  const size_t nodes = v.node_byte.size();
  for (size_t i = 0; i < nodes;) {
    const int d = v.node_depth[i];
    const int32_t next = automaton_.next(at_depth[size_t(d - 1)], v.node_byte[i]);
    if (next == ByteAutomaton::kDead) {
      i = v.subtree_end[i];
      continue;
    }
    at_depth[size_t(d)] = next;
    for (uint32_t t = v.token_begin[i]; t < v.token_begin[i + 1]; ++t) {
      const int32_t id = v.token_ids[t];
      bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
    }
    ++i;
  }
  return bits;
}

std::shared_ptr<const std::vector<uint64_t>> CompiledConstraint::mask(int32_t state) {
  std::lock_guard lock(mu_);
  if (auto it = masks_.find(state); it != masks_.end()) return it->second;
  auto m = std::make_shared<const std::vector<uint64_t>>(walk(state));
  if (masks_.size() < limits_.max_cached_masks) masks_.emplace(state, m);
  return m;
}

int32_t CompiledConstraint::advance(int32_t state, int32_t token) {
  std::lock_guard lock(mu_);
  if (token < 0 || token >= vocab_->size()) return ByteAutomaton::kDead;
  const std::string& b = vocab_->bytes(token);
  if (b.empty()) return ByteAutomaton::kDead;
  for (char c : b) {
    state = automaton_.next(state, uint8_t(c));
    if (state == ByteAutomaton::kDead) break;
  }
  return state;
}

bool CompiledConstraint::accepting(int32_t state) {
  std::lock_guard lock(mu_);
  return automaton_.accepting(state);
}

bool CompiledConstraint::extensible(int32_t state) {
  std::lock_guard lock(mu_);
  for (int b = 0; b < 256; ++b)
    if (automaton_.next(state, uint8_t(b)) != ByteAutomaton::kDead) return true;
  return false;
}

size_t CompiledConstraint::automaton_states() {
  std::lock_guard lock(mu_);
  return automaton_.states();
}

size_t TokenConstraint::mask(std::span<float> logits, std::span<const int32_t> eos_ids) {
  auto bits = c_->mask(state_);
  const bool may_end = c_->accepting(state_);
  // Eos ids carry no bytes, so the mask refuses them; they come back (unchanged) where the grammar may end.
  std::vector<std::pair<size_t, float>> eos_kept;
  if (may_end)
    for (int32_t e : eos_ids)
      if (e >= 0 && size_t(e) < logits.size()) eos_kept.emplace_back(size_t(e), logits[size_t(e)]);
  const size_t covered = std::min(logits.size(), size_t(c_->vocab().size()));
  constexpr float kOff = -std::numeric_limits<float>::infinity();
  size_t allowed = 0;
  for (size_t w = 0; w * 64 < covered; ++w) {
    const uint64_t word = (*bits)[w];
    const size_t end = std::min(covered, w * 64 + 64);
    if (end == w * 64 + 64 && (word == ~uint64_t(0) || word == 0)) {
      if (word) allowed += 64;
      else std::fill(logits.begin() + long(w * 64), logits.begin() + long(end), kOff);
      continue;
    }
    const uint64_t valid = end - w * 64 == 64 ? ~uint64_t(0) : (uint64_t(1) << (end - w * 64)) - 1;
    allowed += size_t(std::popcount(word & valid));
    for (uint64_t off = ~word & valid; off; off &= off - 1) logits[w * 64 + size_t(std::countr_zero(off))] = kOff;
  }
  for (size_t i = covered; i < logits.size(); ++i) logits[i] = kOff;
  for (const auto& [id, value] : eos_kept) {
    if (logits[id] == kOff) ++allowed;
    logits[id] = value;
  }
  return allowed;
}

bool TokenConstraint::accept(int32_t id) {
  const int32_t next = c_->advance(state_, id);
  if (next == ByteAutomaton::kDead) return false;
  state_ = next;
  return true;
}

}  // namespace fs::structured

#include "text/structured/constraint_cache.h"

namespace fs::structured {

ConstraintCache::ConstraintCache(std::shared_ptr<const TokenVocab> vocab, size_t capacity)
    : vocab_(std::move(vocab)), capacity_(capacity) {}

std::shared_ptr<CompiledConstraint> ConstraintCache::get(const ConstraintSpec& spec) {
  const std::string key = spec.key();
  {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  auto compiled = std::make_shared<CompiledConstraint>(grammar_for(spec), vocab_);
  compiled->accepting(0);
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second->second;
  ++compiled_;
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

}  // namespace fs::structured

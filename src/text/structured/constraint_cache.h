#pragma once
// Compiled constraints for one vocabulary, cached by the bytes of their spec (least recently used ones go first),
// so a schema is compiled once and its token masks are shared by every stream that uses it.
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "text/structured/constraint_spec.h"
#include "text/structured/token_constraint.h"

namespace fs::structured {

class ConstraintCache {
 public:
  explicit ConstraintCache(std::shared_ptr<const TokenVocab> vocab, size_t capacity = 64);
  // Throws fs::Error with the reason when the spec is refused.
  std::shared_ptr<CompiledConstraint> get(const ConstraintSpec& spec);
  const std::shared_ptr<const TokenVocab>& vocab() const { return vocab_; }
  size_t compiled() const { return compiled_; }

 private:
  std::mutex mu_;
  std::shared_ptr<const TokenVocab> vocab_;
  size_t capacity_;
  size_t compiled_ = 0;
  std::list<std::pair<std::string, std::shared_ptr<CompiledConstraint>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

}  // namespace fs::structured

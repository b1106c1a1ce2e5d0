#pragma once
// The oldest nodes of a tree that pass a test, collected by one walk and handed out oldest first, so a run of
// evictions walks the tree once per batch instead of once per node. Node needs a `last_used` ordering key.
#include <algorithm>
#include <cstddef>
#include <deque>
#include <vector>

namespace fs {

template <class Node>
class OldestFirst {
 public:
  static constexpr size_t kBatch = 128;

  // The oldest node that passes `test`, from the batch, refilled by `walk` (which calls its argument with every
  // node) when it runs dry; null when no node passes. An entry that no longer passes is skipped.
  template <class Test, class Walk>
  Node* next(Test test, Walk walk) {
    if (Node* n = pop(test)) return n;
    std::vector<Node*> found;
    walk([&](Node* n) {
      if (test(n)) found.push_back(n);
    });
    whole_ = found.size() <= kBatch;
    const size_t keep = std::min(found.size(), kBatch);
    std::partial_sort(found.begin(), found.begin() + std::ptrdiff_t(keep), found.end(), older);
    batch_.assign(found.begin(), found.begin() + std::ptrdiff_t(keep));
    return pop(test);
  }

  // Puts a node that has just come to pass the test in its place among the batch. Past the batch's newest entry it
  // belongs there only when the last walk left nothing out; else a later walk finds it.
  void offer(Node* node) {
    const auto at = std::find_if(batch_.begin(), batch_.end(),
                                 [&](const Node* n) { return n->last_used > node->last_used; });
    if (at != batch_.end() || whole_) batch_.insert(at, node);
  }

  // A node about to be destroyed.
  void forget(const Node* node) {
    std::erase_if(batch_, [&](const Node* n) { return n == node; });
  }

  // Forgets the batch (nodes were used, so their order changed); the next call walks again.
  void clear() {
    batch_.clear();
    whole_ = false;
  }

 private:
  static bool older(const Node* a, const Node* b) { return a->last_used < b->last_used; }

  template <class Test>
  Node* pop(Test test) {
    while (!batch_.empty()) {
      Node* n = batch_.front();
      batch_.pop_front();
      if (test(n)) return n;
    }
    return nullptr;
  }

  std::deque<Node*> batch_;
  bool whole_ = false;  // the last walk found no more passing nodes than the batch holds
};

}  // namespace fs

#include "engine/prompt_cache.h"

#include <algorithm>
#include <utility>

#include "models/kv_pool.h"
#include "models/model.h"

namespace fs {

struct PromptCache::Node {
  std::vector<uint64_t> keys;  // at most page_tokens keys; fewer for a partial page
  int32_t page = -1;           // pool page, or -1 when only in the host tier
  std::vector<float> host;     // the page's data while in the host tier
  Node* parent = nullptr;
  std::vector<std::unique_ptr<Node>> children;
  uint64_t last_used = 0;

  bool on_device() const { return page >= 0; }
};

PromptCache::PromptCache(KvPool& pool, Model& model, int device_pages, int host_pages)
    : pool_(pool), model_(model), max_device_(device_pages), max_host_(host_pages), root_(std::make_unique<Node>()) {}

PromptCache::~PromptCache() {
  std::vector<Node*> stack{root_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (n->on_device()) pool_.release(n->page);
    for (auto& c : n->children) stack.push_back(c.get());
  }
}

void PromptCache::touch(Node* node) {
  for (Node* n = node; n; n = n->parent) n->last_used = ++clock_;
}

PromptCache::Node* PromptCache::best_child(Node* node, std::span<const uint64_t> keys, size_t* common) const {
  Node* best = nullptr;
  *common = 0;
  for (auto& c : node->children) {
    size_t n = std::min(c->keys.size(), keys.size()), m = 0;
    while (m < n && c->keys[m] == keys[m]) ++m;
    if (m > *common) {
      *common = m;
      best = c.get();
    }
  }
  return best;
}

template <class Pred>
PromptCache::Node* PromptCache::least_recent(Pred pred) const {
  Node* best = nullptr;
  std::vector<Node*> stack{root_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& c : n->children) stack.push_back(c.get());
    if (n != root_.get() && pred(n) && (!best || n->last_used < best->last_used)) best = n;
  }
  return best;
}

void PromptCache::drop(Node* node) {
  while (!node->children.empty()) drop(node->children.back().get());
  if (node->on_device()) {
    pool_.release(node->page);
    --stats_.device_pages;
  }
  if (!node->host.empty()) --stats_.host_pages;
  auto& siblings = node->parent->children;
  siblings.erase(std::find_if(siblings.begin(), siblings.end(), [&](auto& c) { return c.get() == node; }));
}

bool PromptCache::make_room_on_host() {
  if (max_host_ <= 0) return false;
  while (stats_.host_pages >= max_host_) {
    Node* victim = least_recent([](Node* n) { return !n->on_device() && n->children.empty(); });
    if (!victim) return false;
    drop(victim);
  }
  return true;
}

bool PromptCache::evict_one() {
  // A device page only the cache holds, whose children have all left the device already.
  Node* victim = least_recent([&](Node* n) {
    if (!n->on_device() || pool_.refcount(n->page) != 1) return false;
    return std::all_of(n->children.begin(), n->children.end(), [](auto& c) { return !c->on_device(); });
  });
  if (!victim) return false;
  if (make_room_on_host()) {
    std::vector<float> data(pool_.page_floats());
    model_.save_kv_page(pool_, victim->page, data.data());  // a throw leaves the page on the device
    victim->host = std::move(data);
    pool_.release(victim->page);
    victim->page = -1;
    --stats_.device_pages;
    ++stats_.host_pages;
  } else {
    drop(victim);
  }
  ++stats_.evictions;
  return true;
}

bool PromptCache::ensure_on_device(Node* node) {
  if (node->on_device()) return true;
  while (stats_.device_pages >= max_device_ || pool_.pages_free() == 0)
    if (!evict_one()) return false;
  auto page = pool_.allocate();
  if (!page) return false;
  model_.load_kv_page(pool_, *page, node->host.data());
  node->page = *page;
  node->host.clear();
  node->host.shrink_to_fit();
  ++stats_.device_pages;
  --stats_.host_pages;
  ++stats_.host_restores;
  return true;
}

CacheHit PromptCache::lookup(std::span<const uint64_t> keys, int max_positions, bool counted) {
  CacheHit hit;
  const size_t P = size_t(pool_.page_tokens());
  Node* node = root_.get();
  size_t pos = 0;
  int32_t held = -1;  // a node's page retained while its positions are copied
  try {
    while (pos < size_t(max_positions)) {
      size_t m = 0;
      Node* c = best_child(node, keys.subspan(pos, size_t(max_positions) - pos), &m);
      if (!c || !ensure_on_device(c)) break;
      touch(c);
      if (m == P) {
        pool_.retain(c->page);
        hit.pages.push_back(c->page);
        pos += P;
        node = c;
        continue;
      }
      // A partial match, or a partial page: the caller writes after it, so it gets a private copy.
      pool_.retain(held = c->page);
      auto fresh = pool_.allocate();
      while (!fresh && evict_one()) fresh = pool_.allocate();
      if (fresh) {
        hit.pages.push_back(*fresh);
        model_.copy_kv_positions(pool_, held, *fresh, int(m));
        pos += m;
      }
      pool_.release(std::exchange(held, -1));
      break;
    }
  } catch (...) {
    if (held >= 0) pool_.release(held);
    for (int32_t p : hit.pages) pool_.release(p);
    throw;
  }
  hit.positions = int(pos);
  if (counted) count_lookup(hit.positions);
  return hit;
}

void PromptCache::count_lookup(int positions) {
  ++stats_.lookups;
  if (positions > 0) {
    ++stats_.hits;
    stats_.cached_tokens += uint64_t(positions);
  }
}

int PromptCache::evictable_pages() const {
  int n = 0;
  std::vector<const Node*> stack{root_.get()};
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    for (auto& c : node->children) stack.push_back(c.get());
    if (node->on_device() && pool_.refcount(node->page) == 1) ++n;
  }
  return n;
}

int PromptCache::insert(std::span<const uint64_t> keys, int positions, std::span<const int32_t> pages) {
  if (max_device_ <= 0) return 0;
  const size_t P = size_t(pool_.page_tokens());
  Node* node = root_.get();
  size_t pos = 0;
  std::vector<int32_t> path;  // pages of the nodes walked, held so room-making cannot evict them
  for (size_t i = 0; pos < size_t(positions) && i < pages.size(); ++i) {
    size_t n = std::min(P, size_t(positions) - pos);
    auto seg = keys.subspan(pos, n);
    Node* same = nullptr;
    for (auto& c : node->children)
      if (c->keys.size() == n && std::equal(seg.begin(), seg.end(), c->keys.begin())) same = c.get();
    if (!same) {
      pool_.retain(pages[i]);  // protects the path from eviction while room is made
      bool room = true;
      while (room && stats_.device_pages >= max_device_) room = evict_one();
      pool_.release(pages[i]);
      if (!room) break;
      auto fresh = std::make_unique<Node>();
      fresh->keys.assign(seg.begin(), seg.end());
      fresh->page = pages[i];
      fresh->parent = node;
      pool_.retain(pages[i]);
      ++stats_.device_pages;
      same = fresh.get();
      node->children.push_back(std::move(fresh));
    } else if (!same->on_device()) {
      same->page = pages[i];
      pool_.retain(pages[i]);
      same->host.clear();
      ++stats_.device_pages;
      --stats_.host_pages;
    }
    touch(same);
    pool_.retain(same->page);
    path.push_back(same->page);
    node = same;
    pos += n;
  }
  for (int32_t p : path) pool_.release(p);
  return int(pos);
}

PromptCacheStats PromptCache::stats() const { return stats_; }

}  // namespace fs

#include "engine/prompt_cache.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/error.h"
#include "models/kv_pool.h"
#include "models/model.h"

namespace fs {

struct PromptCache::Node {
  std::vector<uint64_t> keys;  // at most page_tokens keys; fewer for a partial page
  int32_t page = -1;           // pool page, or -1 when only in the host tier
  std::vector<float> host;     // the page's data while in the host tier
  std::vector<int32_t> state_pages;  // recurrent state after this node's last key, on the device
  std::vector<float> state_host;     // the state's floats while in the host tier
  Node* parent = nullptr;
  std::vector<std::unique_ptr<Node>> children;
  uint64_t last_used = 0;

  bool on_device() const { return page >= 0; }
  bool has_state() const { return !state_pages.empty() || !state_host.empty(); }
};

PromptCache::PromptCache(KvPool& pool, Model& model, int device_pages, int host_pages)
    : pool_(pool), model_(model), max_device_(device_pages), max_host_(host_pages), root_(std::make_unique<Node>()) {
  state_pages_ = model_.state_snapshot_pages(pool_);
}

int PromptCache::pages_of(const Node* node) const { return 1 + (node->has_state() ? state_pages_ : 0); }

PromptCache::~PromptCache() {
  each_node([&](Node* n) {
    if (n->on_device()) pool_.release(n->page);
    pool_.release(n->state_pages);
  });
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
    // With recurrent state, a tie goes to a child that ends there with a snapshot (a partial last page).
    const bool ends_with_state = state_pages_ > 0 && m > 0 && m == *common && m == c->keys.size() && c->has_state();
    if (m > *common || ends_with_state) {
      *common = m;
      best = c.get();
    }
  }
  return best;
}

int PromptCache::deepest_snapshot(std::span<const uint64_t> keys, int max_positions) const {
  Node* node = root_.get();
  size_t pos = 0;
  int deepest = 0;
  while (pos < size_t(max_positions)) {
    size_t m = 0;
    Node* c = best_child(node, keys.subspan(pos, size_t(max_positions) - pos), &m);
    if (!c || m != c->keys.size()) break;
    pos += m;
    if (c->has_state()) deepest = int(pos);
    node = c;
  }
  return deepest;
}

template <class F>
void PromptCache::each_node(F f) const {
  std::vector<Node*> stack{root_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& c : n->children) stack.push_back(c.get());
    if (n != root_.get()) f(n);
  }
}

template <class Pred>
PromptCache::Node* PromptCache::least_recent(Pred pred) const {
  Node* best = nullptr;
  each_node([&](Node* n) {
    if (pred(n) && (!best || n->last_used < best->last_used)) best = n;
  });
  return best;
}

void PromptCache::drop(Node* node) {
  while (!node->children.empty()) drop(node->children.back().get());
  device_drops_.forget(node);
  host_drops_.forget(node);
  if (node->on_device()) {
    pool_.release(node->page);
    pool_.release(node->state_pages);
    stats_.device_pages -= pages_of(node);
  } else {
    stats_.host_pages -= pages_of(node);
  }
  if (node->has_state()) --stats_.state_snapshots;
  auto& siblings = node->parent->children;
  siblings.erase(std::find_if(siblings.begin(), siblings.end(), [&](auto& c) { return c.get() == node; }));
}

bool PromptCache::make_room_on_host(int pages) {
  if (max_host_ < pages) return false;
  while (stats_.host_pages + pages > max_host_) {
    Node* victim = host_drops_.next([&](const Node* n) { return n != restoring_ && droppable(n); },
                                    [&](auto f) { each_node(f); });
    if (!victim) return false;
    Node* parent = victim->parent;
    drop(victim);
    if (parent != root_.get() && droppable(parent)) host_drops_.offer(parent);
  }
  return true;
}

void PromptCache::forget_drop_order() {
  device_drops_.clear();
  host_drops_.clear();
}

bool PromptCache::droppable(const Node* n) { return !n->on_device() && n->children.empty(); }

bool PromptCache::evictable(const Node* n) const {
  if (n == root_.get() || !n->on_device() || pool_.refcount(n->page) != 1) return false;
  return std::all_of(n->children.begin(), n->children.end(), [](auto& c) { return !c->on_device(); });
}

bool PromptCache::evict_one() {
  // A device page only the cache holds, whose children have all left the device already.
  Node* victim = device_drops_.next([&](const Node* n) { return evictable(n); }, [&](auto f) { each_node(f); });
  if (!victim) return drop_shared_snapshot();
  Node* parent = victim->parent;
  if (make_room_on_host(pages_of(victim))) {
    std::vector<float> data(pool_.page_floats()), state;
    model_.save_kv_page(pool_, victim->page, data.data());  // a throw leaves the pages on the device
    if (!victim->state_pages.empty()) {
      state.resize(pool_.state_floats());
      model_.read_state_pages(pool_, victim->state_pages, state.data());
    }
    victim->host = std::move(data);
    victim->state_host = std::move(state);
    pool_.release(victim->page);
    pool_.release(victim->state_pages);
    victim->page = -1;
    victim->state_pages.clear();
    stats_.device_pages -= pages_of(victim);
    stats_.host_pages += pages_of(victim);
    if (droppable(victim)) host_drops_.offer(victim);
  } else {
    drop(victim);
  }
  if (evictable(parent)) device_drops_.offer(parent);
  ++stats_.evictions;
  return true;
}

// A snapshot whose node's page a stream still holds is the cache's alone: it can go while the node stays.
bool PromptCache::drop_shared_snapshot() {
  Node* victim = least_recent([&](Node* n) { return n != resuming_ && !n->state_pages.empty(); });
  if (!victim) return false;
  pool_.release(victim->state_pages);
  stats_.device_pages -= int(victim->state_pages.size());
  victim->state_pages.clear();
  --stats_.state_snapshots;
  ++stats_.evictions;
  return true;
}

bool PromptCache::ensure_on_device(Node* node) {
  if (node->on_device()) return true;
  const int need = pages_of(node);
  // Room on the device may send nodes to the host tier, which may drop host-tier leaves: never this one.
  restoring_ = node;
  bool room = true;
  try {
    while (room && (stats_.device_pages + need > max_device_ || pool_.pages_free() < need)) room = evict_one();
  } catch (...) {
    restoring_ = nullptr;
    throw;
  }
  restoring_ = nullptr;
  if (!room) return false;
  std::vector<int32_t> pages;
  try {
    for (int i = 0; i < need; ++i) pages.push_back(*pool_.allocate());
    model_.load_kv_page(pool_, pages[0], node->host.data());
    if (need > 1) model_.write_state_pages(pool_, std::span(pages).subspan(1), node->state_host.data());
  } catch (...) {
    pool_.release(pages);
    throw;
  }
  node->page = pages[0];
  node->state_pages.assign(pages.begin() + 1, pages.end());
  node->host = {};
  node->state_host = {};
  stats_.device_pages += need;
  stats_.host_pages -= need;
  ++stats_.host_restores;
  return true;
}

// The snapshot goes into pages of its own, padded to whole pages (or keeps the pages it is in); without room it is not
// kept.
void PromptCache::keep_snapshot(Node* node, StateSource state) {
  const int need = state_pages_;
  if (!state.pages.empty() && int(state.pages.size()) != need)
    throw Error("a state snapshot in " + std::to_string(state.pages.size()) + " pages where one takes " +
                std::to_string(need));
  const int allocate = state.pages.empty() ? need : 0;
  while (stats_.device_pages + need > max_device_ || pool_.pages_free() < allocate)
    if (!evict_one()) return;
  std::vector<int32_t> pages;
  try {
    if (!state.pages.empty()) {
      for (int32_t p : state.pages) {
        pool_.retain(p);
        pages.push_back(p);
      }
    } else {
      for (int i = 0; i < need; ++i) pages.push_back(*pool_.allocate());
      if (state.floats) model_.write_state_pages(pool_, pages, state.floats);
      else model_.state_to_pages(pool_, state.slot, pages);
    }
  } catch (...) {
    pool_.release(pages);
    throw;
  }
  node->state_pages = std::move(pages);
  stats_.device_pages += need;
  ++stats_.state_snapshots;
}

// A node only the cache holds, whose children have left the device, goes to the host tier with its snapshot when the
// device has no room for the snapshot.
void PromptCache::park_on_host(Node* node, StateSource state) {
  if (!evictable(node) || !make_room_on_host(1 + state_pages_)) return;
  std::vector<float> data(pool_.page_floats());
  model_.save_kv_page(pool_, node->page, data.data());
  node->host = std::move(data);
  if (state.floats) {
    node->state_host.assign(state.floats, state.floats + pool_.state_floats());
  } else {
    node->state_host.resize(pool_.state_floats());
    if (state.pages.empty()) model_.save_state(pool_, state.slot, node->state_host.data());
    else model_.read_state_pages(pool_, state.pages, node->state_host.data());
  }
  pool_.release(node->page);
  node->page = -1;
  --stats_.device_pages;
  stats_.host_pages += 1 + state_pages_;
  if (droppable(node)) host_drops_.offer(node);
  ++stats_.state_snapshots;
  ++stats_.evictions;
}

void PromptCache::hold_snapshot(const Node* node, std::vector<int32_t>& out) {
  for (int32_t p : node->state_pages) pool_.retain(p);
  pool_.release(out);
  out = node->state_pages;
}

CacheHit PromptCache::lookup(std::span<const uint64_t> keys, int max_positions, bool counted) {
  forget_drop_order();  // streams may have given pages back since
  CacheHit hit;
  const size_t P = size_t(pool_.page_tokens());
  // With recurrent state nothing past the deepest snapshot can be resumed from.
  if (state_pages_ > 0) max_positions = deepest_snapshot(keys, max_positions);
  Node* node = root_.get();
  size_t pos = 0;
  int32_t held = -1;  // a node's page retained while its positions are copied
  size_t resume_pos = 0, resume_pages = 0;  // the deepest snapshot reached
  Node* resume_node = nullptr;              // its node, while its state is still to be copied out
  try {
    while (pos < size_t(max_positions)) {
      size_t m = 0;
      Node* c = best_child(node, keys.subspan(pos, size_t(max_positions) - pos), &m);
      if (!c || !ensure_on_device(c)) break;
      touch(c);
      const bool snapshot = state_pages_ > 0 && m == c->keys.size() && c->has_state();
      if (m == P) {
        pool_.retain(c->page);
        hit.pages.push_back(c->page);
        pos += P;
        node = c;
        if (snapshot) {
          resuming_ = resume_node = c;
          resume_pos = pos;
          resume_pages = hit.pages.size();
        }
        continue;
      }
      // A partial match, or a partial page: the caller writes after it, so it gets a private copy. Its snapshot is
      // held first, so making room for the copy cannot drop it.
      pool_.retain(held = c->page);
      if (snapshot) hold_snapshot(c, hit.state_pages);
      auto fresh = pool_.allocate();
      while (!fresh && evict_one()) fresh = pool_.allocate();
      if (fresh) {
        hit.pages.push_back(*fresh);
        model_.copy_kv_positions(pool_, held, *fresh, int(m));
        pos += m;
        if (snapshot) {
          resume_node = nullptr;
          resume_pos = pos;
          resume_pages = hit.pages.size();
        }
      } else {
        pool_.release(hit.state_pages);
        hit.state_pages.clear();
      }
      pool_.release(std::exchange(held, -1));
      break;
    }
    if (resume_node) hold_snapshot(resume_node, hit.state_pages);  // its snapshot was kept by resuming_
    resuming_ = nullptr;
    if (state_pages_ > 0) {
      for (size_t i = resume_pages; i < hit.pages.size(); ++i) pool_.release(hit.pages[i]);
      hit.pages.resize(resume_pages);
      pos = resume_pos;
      if (pos == 0) {
        pool_.release(hit.state_pages);
        hit.state_pages.clear();
      }
    }
  } catch (...) {
    resuming_ = nullptr;
    if (held >= 0) pool_.release(held);
    pool_.release(hit.pages);
    pool_.release(hit.state_pages);
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
  each_node([&](const Node* node) {
    if (node->on_device()) n += pool_.refcount(node->page) == 1 ? pages_of(node) : int(node->state_pages.size());
  });
  return n;
}

int PromptCache::insert(std::span<const uint64_t> keys, int positions, std::span<const int32_t> pages,
                        StateSource state) {
  if (max_device_ <= 0) return 0;
  forget_drop_order();
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
      // The page comes back from the stream; a snapshot in the host tier is dropped rather than moved.
      stats_.host_pages -= pages_of(same);
      if (same->has_state()) --stats_.state_snapshots;
      same->state_host = {};
      same->page = pages[i];
      pool_.retain(pages[i]);
      same->host = {};
      ++stats_.device_pages;
    } else if (same->page != pages[i] && pool_.refcount(same->page) == 1) {
      // A copy only the cache holds of the stream's page: the node takes the stream's page and the copy goes, so the
      // stream never waits on a page its own prefix pins.
      pool_.retain(pages[i]);
      pool_.release(same->page);
      same->page = pages[i];
    }
    touch(same);
    pool_.retain(same->page);
    path.push_back(same->page);
    node = same;
    pos += n;
  }
  try {
    if (state && state_pages_ > 0 && pos == size_t(positions) && node != root_.get() && !node->has_state())
      keep_snapshot(node, state);
  } catch (...) {
    pool_.release(path);
    throw;
  }
  pool_.release(path);
  return int(pos);
}

bool PromptCache::keep_state(std::span<const uint64_t> keys, int positions, StateSource state) {
  if (state_pages_ == 0 || positions <= 0) return false;
  forget_drop_order();
  const size_t P = size_t(pool_.page_tokens());
  Node* node = root_.get();
  std::vector<int32_t> path;  // held so room-making cannot evict the node or its ancestors
  for (size_t pos = 0; pos < size_t(positions) && node;) {
    const size_t n = std::min(P, size_t(positions) - pos);
    Node* next = nullptr;
    for (auto& c : node->children)
      if (c->on_device() && c->keys.size() == n && std::equal(c->keys.begin(), c->keys.end(), keys.begin() + pos))
        next = c.get();
    if (next) {
      pool_.retain(next->page);
      path.push_back(next->page);
      pos += n;
    }
    node = next;
  }
  try {
    if (node && !node->has_state()) keep_snapshot(node, state);
    if (node && !node->has_state()) {
      // Its own hold goes first: only a page the cache alone holds moves to the host tier.
      pool_.release(path.back());
      path.pop_back();
      park_on_host(node, state);
    }
  } catch (...) {
    pool_.release(path);
    throw;
  }
  pool_.release(path);
  return node && node->has_state();
}

PromptCacheStats PromptCache::stats() const { return stats_; }

}  // namespace fs

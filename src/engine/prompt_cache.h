#pragma once
// The prompt cache: a radix tree over token keys whose nodes hold one KV page each (a full page of positions, or
// a partial last page), shared by reference count with the streams that adopt them. Evicted pages can move to a
// host-memory tier and come back on a hit. For models with recurrent state, a node may also hold a snapshot of that
// state after its last position, in pool pages of its own; a lookup then resumes at the deepest snapshot.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/oldest_first.h"

namespace fs {

class KvPool;
class Model;

struct PromptCacheStats {
  uint64_t lookups = 0;
  uint64_t hits = 0;
  uint64_t cached_tokens = 0;  // positions adopted, summed over hits
  uint64_t evictions = 0;      // pages leaving the device (to the host tier or dropped)
  uint64_t host_restores = 0;  // pages brought back from the host tier
  int device_pages = 0;        // pages of the pool the cache holds (state snapshots' pages included)
  int host_pages = 0;
  int state_snapshots = 0;     // recurrent-state snapshots kept, on the device or in the host tier
};

struct CacheHit {
  std::vector<int32_t> pages;  // retained for the caller, in position order
  int positions = 0;           // positions whose K/V these pages hold
  // Models with recurrent state: the pages of the snapshot after `positions` positions, retained for the caller
  // (Model::pages_to_state copies them into a slot).
  std::vector<int32_t> state_pages;
};

// The recurrent state a snapshot copies: host floats, a state slot of the model as it stands now (copied on the
// model's side, on the device for a device backend, without a trip through the host), or snapshot pages a forward
// pass already wrote (the cache retains them instead of copying).
struct StateSource {
  StateSource() = default;
  StateSource(const float* host) : floats(host) {}
  static StateSource slot_of(int32_t state_slot) {
    StateSource s;
    s.slot = state_slot;
    return s;
  }
  static StateSource pages_of(std::span<const int32_t> snapshot_pages) {
    StateSource s;
    s.pages = snapshot_pages;
    return s;
  }
  explicit operator bool() const { return floats || slot >= 0 || !pages.empty(); }
  const float* floats = nullptr;
  int32_t slot = -1;
  std::span<const int32_t> pages;
};

// A stream's recurrent state after `position` positions, taken for the prompt cache: in host floats, or in pool
// pages of its own (retained by the stream until the cache takes them).
struct StateSnapshot {
  int position = 0;
  std::vector<float> state;
  std::vector<int32_t> pages;
};

class PromptCache {
 public:
  // Keeps at most `device_pages` pages of the pool and `host_pages` pages in host memory, snapshots' pages included
  // (a pool with state slots: each snapshot takes ceil(state floats / page floats) pages).
  PromptCache(KvPool& pool, Model& model, int device_pages, int host_pages);
  ~PromptCache();

  // Adopts the longest cached prefix of keys[0, max_positions): full pages are shared, a partially matching page
  // is copied into a fresh page. With recurrent state, the prefix ends at the deepest snapshot, whose pages the hit
  // holds. The returned pages (state pages included) are the caller's to release. `counted` → the lookup and its
  // hit enter the stats now; else the caller counts it with count_lookup (or never, for a stream re-adopting its own
  // prefix). On an exception nothing stays retained for the caller.
  CacheHit lookup(std::span<const uint64_t> keys, int max_positions, bool counted = true);
  void count_lookup(int positions);
  // Keeps the K/V of keys[0, positions) held in `pages`, and `state` (the recurrent state after `positions`, or null)
  // when the whole prefix is kept and room is found; returns how many positions the tree now covers for them
  // (fewer when nothing could be evicted to make room).
  int insert(std::span<const uint64_t> keys, int positions, std::span<const int32_t> pages, StateSource state = {});
  // Keeps `state` at the node that ends keys[0, positions) exactly (evicting others for room, or moving that node
  // to the host tier with it); false when there is no such node or no room.
  bool keep_state(std::span<const uint64_t> keys, int positions, StateSource state);
  // Frees one node's device pages that the cache alone holds (least recently used), else a snapshot of a node a
  // stream still holds; false when none can go.
  bool evict_one();
  // Device pages only the cache holds: what evict_one can free, one call at a time.
  int evictable_pages() const;
  // Pool pages one state snapshot takes (0 without recurrent state).
  int pages_per_snapshot() const { return state_pages_; }
  PromptCacheStats stats() const;

 private:
  struct Node;
  Node* best_child(Node* node, std::span<const uint64_t> keys, size_t* common) const;
  // Positions up to the deepest node with a state snapshot along keys[0, max_positions).
  int deepest_snapshot(std::span<const uint64_t> keys, int max_positions) const;
  int pages_of(const Node* node) const;
  bool ensure_on_device(Node* node);
  void keep_snapshot(Node* node, StateSource state);
  // Retains the node's snapshot pages into `out` (releasing any it held).
  void hold_snapshot(const Node* node, std::vector<int32_t>& out);
  void park_on_host(Node* node, StateSource state);
  void drop(Node* node);
  bool make_room_on_host(int pages);
  bool drop_shared_snapshot();
  void touch(Node* node);
  // Calls f(node) for every node below the root, each after its children were queued (so f may not remove any).
  template <class F> void each_node(F f) const;
  template <class Pred> Node* least_recent(Pred pred) const;
  // A device node only the cache holds whose children have all left the device: what evict_one takes.
  bool evictable(const Node* node) const;
  // A host-tier node without children: what make_room_on_host drops.
  static bool droppable(const Node* node);
  // Clears both drop orders; every call that uses nodes or takes pages from streams starts with it.
  void forget_drop_order();

  // The oldest evictable device nodes and the oldest droppable host-tier nodes, each from one walk of the tree; an
  // entry a stream has retained since, or that came back to the device, is skipped.
  OldestFirst<Node> device_drops_, host_drops_;

  KvPool& pool_;
  Model& model_;
  int max_device_, max_host_;
  int state_pages_ = 0;  // pool pages per recurrent-state snapshot
  const Node* resuming_ = nullptr;  // the node a lookup in progress will resume from: its snapshot stays
  const Node* restoring_ = nullptr;  // the host-tier node coming back to the device: room-making keeps it
  std::unique_ptr<Node> root_;
  uint64_t clock_ = 0;
  PromptCacheStats stats_;
};

}  // namespace fs

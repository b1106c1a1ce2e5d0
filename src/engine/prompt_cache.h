#pragma once
// The prompt cache: a radix tree over token keys whose nodes hold one KV page each (a full page of positions, or
// a partial last page), shared by reference count with the streams that adopt them. Evicted pages can move to a
// host-memory tier and come back on a hit.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace fs {

class KvPool;
class Model;

struct PromptCacheStats {
  uint64_t lookups = 0;
  uint64_t hits = 0;
  uint64_t cached_tokens = 0;  // positions adopted, summed over hits
  uint64_t evictions = 0;      // pages leaving the device (to the host tier or dropped)
  uint64_t host_restores = 0;  // pages brought back from the host tier
  int device_pages = 0;        // pages of the pool the cache holds
  int host_pages = 0;
};

struct CacheHit {
  std::vector<int32_t> pages;  // retained for the caller, in position order
  int positions = 0;           // positions whose K/V these pages hold
};

class PromptCache {
 public:
  // Keeps at most `device_pages` pages of the pool and `host_pages` pages in host memory.
  PromptCache(KvPool& pool, Model& model, int device_pages, int host_pages);
  ~PromptCache();

  // Adopts the longest cached prefix of keys[0, max_positions): full pages are shared, a partially matching page
  // is copied into a fresh page. The returned pages are the caller's to release. `counted` → the lookup and its
  // hit enter the stats now; else the caller counts it with count_lookup (or never, for a stream re-adopting its
  // own prefix). On an exception nothing stays retained for the caller.
  CacheHit lookup(std::span<const uint64_t> keys, int max_positions, bool counted = true);
  void count_lookup(int positions);
  // Keeps the K/V of keys[0, positions) held in `pages`; returns how many positions the tree now covers for them
  // (fewer when nothing could be evicted to make room).
  int insert(std::span<const uint64_t> keys, int positions, std::span<const int32_t> pages);
  // Frees one device page the cache alone holds (least recently used); false when none can go.
  bool evict_one();
  // Device pages only the cache holds: what evict_one can free, one by one.
  int evictable_pages() const;
  PromptCacheStats stats() const;

 private:
  struct Node;
  Node* best_child(Node* node, std::span<const uint64_t> keys, size_t* common) const;
  bool ensure_on_device(Node* node);
  void drop(Node* node);
  bool make_room_on_host();
  void touch(Node* node);
  template <class Pred> Node* least_recent(Pred pred) const;

  KvPool& pool_;
  Model& model_;
  int max_device_, max_host_;
  std::unique_ptr<Node> root_;
  uint64_t clock_ = 0;
  PromptCacheStats stats_;
};

}  // namespace fs

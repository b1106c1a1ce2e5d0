#pragma once
// Compact lookup tables for large vocabularies: token text ↔ id, and merge pair → (rank, merged id).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fs::text {

// Token strings kept in one arena with an open-addressing hash from text to id and a table from id to text.
class TokenTable {
 public:
  void reserve(size_t n);
  void reserve_text(size_t bytes) { arena_.reserve(bytes); }
  // Adds (text, id); a repeated text takes the later id (as a JSON object does), a repeated id keeps its first text.
  void add(std::string_view text, int32_t id);
  std::optional<int32_t> find(std::string_view text) const;
  // Text of id, or nullopt for an unused id.
  std::optional<std::string_view> text(int32_t id) const;
  int32_t id_bound() const { return static_cast<int32_t>(by_id_.size()); }  // 1 + largest id
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    uint32_t offset;
    uint32_t length;
    int32_t id;
  };
  std::string_view at(const Entry& e) const { return {arena_.data() + e.offset, e.length}; }
  void rehash(size_t capacity);
  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<int32_t> by_id_;  // entry index per id, -1 when unused
  std::vector<int32_t> slots_;  // entry index, -1 empty
};

// (left id, right id) → (rank, merged id), open addressing.
class MergeTable {
 public:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  void reserve(size_t n);
  // Keeps the first (lowest) rank for a pair that repeats.
  void add(int32_t left, int32_t right, Merge m);
  const Merge* find(int32_t left, int32_t right) const {
    if (keys_.empty()) return nullptr;
    uint64_t key = pack(left, right);
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }
  size_t size() const { return count_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void rehash(size_t capacity);
  std::vector<uint64_t> keys_;
  std::vector<Merge> values_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t count_ = 0;
};

}  // namespace fs::text

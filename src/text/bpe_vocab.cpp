#include "text/bpe_vocab.h"

#include <algorithm>
#include <functional>

#include "core/error.h"

namespace fs::text {

static size_t hash_text(std::string_view s) { return std::hash<std::string_view>{}(s); }

void TokenTable::reserve(size_t n) {
  entries_.reserve(n);
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  if (cap > slots_.size()) rehash(cap);
}

void TokenTable::rehash(size_t capacity) {
  slots_.assign(capacity, -1);
  size_t mask = capacity - 1;
  for (size_t e = 0; e < entries_.size(); ++e) {
    size_t i = hash_text(at(entries_[e])) & mask;
    while (slots_[i] >= 0) i = (i + 1) & mask;
    slots_[i] = static_cast<int32_t>(e);
  }
}

void TokenTable::add(std::string_view text, int32_t id) {
  if (id < 0) throw Error("tokenizer.json: negative token id for '" + std::string(text) + "'");
  if (arena_.size() + text.size() > 0xFFFFFFFFull) throw Error("tokenizer.json: vocabulary too large");
  if ((entries_.size() + 1) * 2 > slots_.size()) rehash(std::max<size_t>(slots_.size() * 4, 1024));
  if (static_cast<size_t>(id) >= by_id_.size()) by_id_.resize(static_cast<size_t>(id) + 1, -1);
  size_t mask = slots_.size() - 1;
  size_t i = hash_text(text) & mask;
  for (; slots_[i] >= 0; i = (i + 1) & mask) {
    Entry& e = entries_[slots_[i]];
    if (at(e) == text) {
      e.id = id;
      if (by_id_[id] < 0) by_id_[id] = slots_[i];
      return;
    }
  }
  slots_[i] = static_cast<int32_t>(entries_.size());
  if (by_id_[id] < 0) by_id_[id] = slots_[i];
  entries_.push_back(Entry{static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(text.size()), id});
  arena_.append(text);
}

std::optional<int32_t> TokenTable::find(std::string_view text) const {
  if (slots_.empty()) return std::nullopt;
  size_t mask = slots_.size() - 1;
  for (size_t i = hash_text(text) & mask; slots_[i] >= 0; i = (i + 1) & mask)
    if (at(entries_[slots_[i]]) == text) return entries_[slots_[i]].id;
  return std::nullopt;
}

std::optional<std::string_view> TokenTable::text(int32_t id) const {
  if (id < 0 || id >= id_bound() || by_id_[id] < 0) return std::nullopt;
  return at(entries_[by_id_[id]]);
}

void MergeTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  if (cap > keys_.size()) rehash(cap);
}

void MergeTable::rehash(size_t capacity) {
  std::vector<uint64_t> old_keys = std::move(keys_);
  std::vector<Merge> old_values = std::move(values_);
  keys_.assign(capacity, kEmpty);
  values_.assign(capacity, Merge{0, 0});
  mask_ = capacity - 1;
  shift_ = 64;
  for (size_t c = capacity; c > 1; c >>= 1) --shift_;
  for (size_t k = 0; k < old_keys.size(); ++k) {
    if (old_keys[k] == kEmpty) continue;
    size_t i = slot(old_keys[k]);
    while (keys_[i] != kEmpty) i = (i + 1) & mask_;
    keys_[i] = old_keys[k];
    values_[i] = old_values[k];
  }
}

void MergeTable::add(int32_t left, int32_t right, Merge m) {
  if ((count_ + 1) * 2 > keys_.size()) rehash(std::max<size_t>(keys_.size() * 4, 1024));
  uint64_t key = pack(left, right);
  size_t i = slot(key);
  for (; keys_[i] != kEmpty; i = (i + 1) & mask_)
    if (keys_[i] == key) return;
  keys_[i] = key;
  values_[i] = m;
  ++count_;
}

}  // namespace fs::text

#include "text/bpe.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "core/error.h"

namespace fs::text {

void BpeModel::add_merge(std::string_view left, std::string_view right) {
  auto a = vocab_.find(left);
  auto b = vocab_.find(right);
  if (!a || !b)
    throw Error("tokenizer.json: merge '" + std::string(left) + " " + std::string(right) +
                "' uses a token that is not in the vocabulary");
  std::string_view tail = right;
  const auto& prefix = options_.continuing_subword_prefix;
  if (!prefix.empty() && tail.substr(0, prefix.size()) == prefix) tail.remove_prefix(prefix.size());
  std::string joined;
  joined.reserve(left.size() + tail.size());
  joined.append(left).append(tail);
  auto merged = vocab_.find(joined);
  if (!merged) throw Error("tokenizer.json: merged token '" + joined + "' is not in the vocabulary");
  merges_.add(*a, *b, MergeTable::Merge{next_rank_++, *merged});
}

void BpeModel::finish() {
  if (options_.unk_token) {
    unk_id_ = vocab_.find(*options_.unk_token);
    if (!unk_id_) throw Error("tokenizer.json: unk_token '" + *options_.unk_token + "' is not in the vocabulary");
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_ids_[b] = vocab_.find(name).value_or(-1);
  }
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& ids) const {
  int32_t pending_unk = -1;  // an unknown token not yet emitted (fuse_unk extends it)
  std::string buffer;
  for (size_t i = 0; i < word.size();) {
    size_t start = i;
    auto lead = static_cast<unsigned char>(word[i]);
    i += lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    i = std::min(i, word.size());
    std::string_view ch = word.substr(start, i - start);
    bool decorated = (start > 0 && !options_.continuing_subword_prefix.empty()) ||
                     (i == word.size() && !options_.end_of_word_suffix.empty());
    if (decorated) {
      buffer.clear();
      if (start > 0) buffer += options_.continuing_subword_prefix;
      buffer.append(ch);
      if (i == word.size()) buffer += options_.end_of_word_suffix;
      ch = buffer;
    }
    if (auto id = vocab_.find(ch)) {
      if (pending_unk >= 0) ids.push_back(pending_unk), pending_unk = -1;
      ids.push_back(*id);
      continue;
    }
    if (options_.byte_fallback &&
        std::all_of(ch.begin(), ch.end(), [&](char c) { return byte_ids_[static_cast<unsigned char>(c)] >= 0; })) {
      for (char c : ch) ids.push_back(byte_ids_[static_cast<unsigned char>(c)]);
      continue;
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !options_.fuse_unk) ids.push_back(pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) ids.push_back(pending_unk);
}

namespace {

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

struct Candidate {
  int32_t rank;
  int32_t pos;
  // Lowest rank first, then leftmost.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<int32_t> ids;
  thread_local std::vector<Symbol> syms;
  thread_local std::vector<Candidate> heap;
  ids.clear();
  initial_symbols(word, ids);
  int32_t n = static_cast<int32_t>(ids.size());
  syms.resize(ids.size());
  for (int32_t k = 0; k < n; ++k) syms[k] = Symbol{ids[k], k - 1, k + 1 < n ? k + 1 : -1, true};
  heap.clear();
  for (int32_t k = 0; k + 1 < n; ++k)
    if (auto m = merges_.find(syms[k].id, syms[k + 1].id)) heap.push_back({m->rank, k});
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = syms[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = syms[left.next];
    auto m = merges_.find(left.id, right.id);
    if (!m || m->rank != top.rank) continue;
    left.id = m->id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) syms[left.next].prev = top.pos;
    if (left.prev >= 0)
      if (auto p = merges_.find(syms[left.prev].id, left.id)) {
        heap.push_back({p->rank, left.prev});
        std::push_heap(heap.begin(), heap.end());
      }
    if (left.next >= 0)
      if (auto p = merges_.find(left.id, syms[left.next].id)) {
        heap.push_back({p->rank, top.pos});
        std::push_heap(heap.begin(), heap.end());
      }
  }
  for (int32_t k = n > 0 ? 0 : -1; k >= 0; k = syms[k].next) out.push_back(syms[k].id);
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges)
    if (auto id = vocab_.find(word)) {
      out.push_back(*id);
      return;
    }
  if (word.size() > kMaxCachedWord) {
    merge_word(word, out);
    return;
  }
  Shard& shard = cache_[(TextHash{}(word) >> 7) % kShards];
  {
    std::lock_guard<std::mutex> lock(shard.mutex);
    auto it = shard.words.find(word);
    if (it != shard.words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = out.size();
  merge_word(word, out);
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.words.size() < kShardCapacity)
    shard.words.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
}

}  // namespace fs::text

#pragma once
// The BPE model of tokenizer.json: vocabulary, ranked merges, byte fallback, unknown token, and a word cache.
#include <array>
#include <functional>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/bpe_vocab.h"

namespace fs::text {

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel {
 public:
  explicit BpeModel(BpeOptions options) : options_(std::move(options)) {}

  TokenTable& vocab() { return vocab_; }
  const TokenTable& vocab() const { return vocab_; }
  // Registers merge "left right" with the next rank; throws fs::Error when a part or the result is not a token.
  void add_merge(std::string_view left, std::string_view right);
  void reserve_merges(size_t n) { merges_.reserve(n); }
  // Checks the options against the vocabulary (unk token present) once everything is added.
  void finish();

  // Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  // Initial symbols: one per character (prefix/suffix applied), byte-fallback tokens, or the unknown token.
  void initial_symbols(std::string_view word, std::vector<int32_t>& ids) const;

  BpeOptions options_;
  TokenTable vocab_;
  MergeTable merges_;
  int32_t next_rank_ = 0;
  std::optional<int32_t> unk_id_;
  std::array<int32_t, 256> byte_ids_{};  // <0xXX> tokens, -1 when absent

  // Word → ids cache, sharded to keep contention low when several threads encode.
  static constexpr size_t kShards = 16;
  static constexpr size_t kShardCapacity = 4096;
  static constexpr size_t kMaxCachedWord = 256;
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, TextHash, std::equal_to<>> words;
  };
  mutable std::array<Shard, kShards> cache_;
};

}  // namespace fs::text

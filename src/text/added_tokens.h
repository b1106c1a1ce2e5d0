#pragma once
// Added tokens (tokenizer.json "added_tokens"): found in the text before the model runs, with the tokenizers
// library's flags — special, single_word, lstrip, rstrip, normalized — and its leftmost-longest matching.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/pre_tokenizer.h"

namespace fs::text {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

class AddedVocabulary {
 public:
  void add(AddedToken token);
  // Splits the unclaimed pieces at matches of the tokens whose `normalized` flag equals `normalized`.
  void split(std::vector<Piece>& pieces, bool normalized) const;
  // Splits one raw piece at matches of the raw tokens, except matches that overlap a `literal` byte range
  // [begin, end) of its text: those bytes stay ordinary text.
  void split_outside(const Piece& piece, const std::vector<std::pair<size_t, size_t>>& literal,
                     std::vector<Piece>& out) const;
  const AddedToken* by_id(int32_t id) const;
  const AddedToken* by_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool has_normalized() const { return !tries_[1].nodes.empty(); }

 private:
  // A byte trie; terminal nodes name the token (index into tokens_).
  struct Trie {
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
      int32_t token = -1;
    };
    std::vector<Node> nodes;
    bool first_byte[256] = {};
    void insert(std::string_view s, int32_t token);
    // Longest token starting at s[i], as (token index, length), or (-1, 0).
    std::pair<int32_t, size_t> longest_at(std::string_view s, size_t i) const;
  };
  void split_one(const Piece& piece, const Trie& trie, std::vector<Piece>& out,
                 const std::vector<std::pair<size_t, size_t>>* literal = nullptr) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  Trie tries_[2];  // [0] matched on raw text, [1] on normalized text
};

}  // namespace fs::text

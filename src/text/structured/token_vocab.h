#pragma once
// The bytes every token decodes to, and a trie over them laid out in preorder so that one pass over arrays walks
// every token against a byte automaton (skipping whole subtrees the automaton refuses).
#include <cstdint>
#include <string>
#include <vector>

namespace fs {
class Tokenizer;
}

namespace fs::structured {

class TokenVocab {
 public:
  // Special tokens and tokens without bytes get no trie entry (a constraint never allows them).
  explicit TokenVocab(const Tokenizer& tok);
  // From explicit byte strings (empty → never allowed).
  explicit TokenVocab(std::vector<std::string> token_bytes);

  int32_t size() const { return int32_t(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }

  // Trie nodes in preorder: node i reads byte node_byte[i] at depth node_depth[i] (1-based), its subtree ends
  // before subtree_end[i], and tokens token_ids[token_begin[i] .. token_begin[i + 1]) end there.
  std::vector<uint8_t> node_byte;
  std::vector<uint16_t> node_depth;
  std::vector<uint32_t> subtree_end;
  std::vector<uint32_t> token_begin;
  std::vector<int32_t> token_ids;
  int max_depth = 0;

 private:
  void build_trie();
  std::vector<std::string> bytes_;
};

// The bytes of one token of `tok`: byte-level BPE symbols mapped back to bytes, SentencePiece "▁" as a space and
// <0xNN> as its byte, else the token's decoded text; empty for special tokens.
std::string token_bytes(const Tokenizer& tok, int32_t id, bool byte_level);

}  // namespace fs::structured

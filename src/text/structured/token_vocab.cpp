#include "text/structured/token_vocab.h"

#include <algorithm>
#include <numeric>

#include "text/byte_level.h"
#include "text/tokenizer.h"

namespace fs::structured {

namespace {

// Whether most tokens spell bytes in the GPT-2 byte-level alphabet ("Ġ" for a space).
bool looks_byte_level(const Tokenizer& tok) {
  return tok.token_to_id("\xc4\xa0").has_value() || tok.token_to_id("\xc4\x8a").has_value();
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string token_bytes(const Tokenizer& tok, int32_t id, bool byte_level) {
  if (tok.is_special(id)) return "";
  const std::string piece = tok.id_to_token(id);
  std::string out;
  if (byte_level) {
    if (text::byte_level_to_bytes(piece, out)) return out;
    return tok.decode({id}, false);  // an added token spelled as plain text
  }
  if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>') {
    int hi = hex_digit(piece[3]), lo = hex_digit(piece[4]);
    if (hi >= 0 && lo >= 0) return std::string(1, char(hi * 16 + lo));
  }
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, 3, "\xe2\x96\x81") == 0) {
      out += ' ';
      i += 3;
    } else {
      out += piece[i++];
    }
  }
  return out;
}

TokenVocab::TokenVocab(const Tokenizer& tok) {
  const bool byte_level = looks_byte_level(tok);
  bytes_.resize(size_t(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) bytes_[size_t(id)] = token_bytes(tok, id, byte_level);
  build_trie();
}

TokenVocab::TokenVocab(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) { build_trie(); }

void TokenVocab::build_trie() {
  std::vector<int32_t> order;
  for (int32_t id = 0; id < size(); ++id)
    if (!bytes_[size_t(id)].empty()) order.push_back(id);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[size_t(a)] != bytes_[size_t(b)] ? bytes_[size_t(a)] < bytes_[size_t(b)] : a < b;
  });
  // Sorted strings give the preorder: a node is opened for each byte past the prefix shared with the previous token.
  std::vector<uint32_t> open;  // node index per depth on the current path
  std::string prev;
  for (int32_t id : order) {
    const std::string& s = bytes_[size_t(id)];
    size_t common = 0;
    while (common < prev.size() && common < s.size() && prev[common] == s[common]) ++common;
    while (open.size() > common) {
      subtree_end[open.back()] = uint32_t(node_byte.size());
      open.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      open.push_back(uint32_t(node_byte.size()));
      node_byte.push_back(uint8_t(s[d]));
      node_depth.push_back(uint16_t(d + 1));
      subtree_end.push_back(0);
      token_begin.push_back(uint32_t(token_ids.size()));
    }
    token_ids.push_back(id);
    max_depth = std::max(max_depth, int(s.size()));
    prev = s;
  }
  while (!open.empty()) {
    subtree_end[open.back()] = uint32_t(node_byte.size());
    open.pop_back();
  }
  token_begin.push_back(uint32_t(token_ids.size()));
}

}  // namespace fs::structured

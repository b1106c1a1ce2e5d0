#include "text/added_tokens.h"

#include <algorithm>

#include "core/error.h"
#include "text/utf8.h"

namespace fs::text {

void AddedVocabulary::Trie::insert(std::string_view s, int32_t token) {
  if (nodes.empty()) nodes.emplace_back();
  first_byte[static_cast<unsigned char>(s[0])] = true;
  int32_t node = 0;
  for (unsigned char b : s) {
    auto& kids = nodes[node].children;
    auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, INT32_MIN));
    if (it != kids.end() && it->first == b) {
      node = it->second;
    } else {
      int32_t next = static_cast<int32_t>(nodes.size());
      kids.insert(it, {b, next});
      nodes.emplace_back();
      node = next;
    }
  }
  // The first token with a given content keeps it, as a later duplicate cannot be told apart.
  if (nodes[node].token < 0) nodes[node].token = token;
}

std::pair<int32_t, size_t> AddedVocabulary::Trie::longest_at(std::string_view s, size_t i) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t node = 0;
  for (size_t k = i; k < s.size(); ++k) {
    const auto& kids = nodes[node].children;
    auto b = static_cast<unsigned char>(s[k]);
    auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, INT32_MIN));
    if (it == kids.end() || it->first != b) break;
    node = it->second;
    if (nodes[node].token >= 0) best = {nodes[node].token, k + 1 - i};
  }
  return best;
}

void AddedVocabulary::add(AddedToken token) {
  if (token.content.empty()) throw Error("tokenizer.json: added token " + std::to_string(token.id) + " is empty");
  if (token.id < 0) throw Error("tokenizer.json: added token '" + token.content + "' has no valid id");
  size_t index = tokens_.size();
  by_id_[token.id] = index;
  by_content_.emplace(token.content, index);
  tries_[token.normalized ? 1 : 0].insert(token.content, static_cast<int32_t>(index));
  tokens_.push_back(std::move(token));
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::by_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

namespace {

// The character that ends s[..end) / starts s[begin..).
char32_t char_before(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return next_code_point(s, start);
}

char32_t char_at(std::string_view s, size_t begin) { return next_code_point(s, begin); }

}  // namespace

void AddedVocabulary::split_one(const Piece& piece, const Trie& trie, std::vector<Piece>& out,
                                const std::vector<std::pair<size_t, size_t>>* literal) const {
  std::string_view s = piece.text;
  size_t emitted = 0;  // end of the last claimed stretch
  for (size_t i = 0; i < s.size();) {
    if (!trie.first_byte[static_cast<unsigned char>(s[i])]) {
      ++i;
      continue;
    }
    auto [index, length] = trie.longest_at(s, i);
    if (index < 0) {
      ++i;
      continue;
    }
    const size_t match_end = i + length;  // a plain variable: clang 14 cannot capture a structured binding
    if (literal && std::any_of(literal->begin(), literal->end(), [&](const std::pair<size_t, size_t>& r) {
          return i < r.second && match_end > r.first;
        })) {
      ++i;
      continue;
    }
    const AddedToken& tok = tokens_[index];
    size_t start = i, stop = i + length;
    if (tok.single_word) {
      bool start_ok = start == 0 || !is_word_char(char_before(s, start));
      bool stop_ok = stop == s.size() || !is_word_char(char_at(s, stop));
      if (!start_ok || !stop_ok) {
        i = stop;  // matching resumes after the rejected match, as a non-overlapping scan does
        continue;
      }
    }
    if (tok.lstrip) {
      while (start > emitted) {
        size_t prev = start - 1;
        while (prev > 0 && (static_cast<unsigned char>(s[prev]) & 0xC0) == 0x80) --prev;
        size_t probe = prev;
        if (!is_whitespace(next_code_point(s, probe))) break;
        start = prev;
      }
    }
    if (tok.rstrip) {
      while (stop < s.size()) {
        size_t next = stop;
        if (!is_whitespace(next_code_point(s, next))) break;
        stop = next;
      }
    }
    if (start > emitted) out.push_back(Piece{std::string(s.substr(emitted, start - emitted)), -1, piece.at_start && emitted == 0});
    out.push_back(Piece{std::string(s.substr(start, stop - start)), tok.id, false});
    emitted = stop;
    i = stop;
  }
  if (emitted == 0) {
    out.push_back(piece);
  } else if (emitted < s.size()) {
    out.push_back(Piece{std::string(s.substr(emitted)), -1, false});
  }
}

void AddedVocabulary::split_outside(const Piece& piece, const std::vector<std::pair<size_t, size_t>>& literal,
                                    std::vector<Piece>& out) const {
  if (tries_[0].nodes.empty()) {
    out.push_back(piece);
    return;
  }
  split_one(piece, tries_[0], out, &literal);
}

void AddedVocabulary::split(std::vector<Piece>& pieces, bool normalized) const {
  const Trie& trie = tries_[normalized ? 1 : 0];
  if (trie.nodes.empty()) return;
  std::vector<Piece> out;
  out.reserve(pieces.size() + 4);
  for (auto& p : pieces) {
    if (p.id >= 0 || p.text.empty()) {
      if (!p.text.empty() || p.id >= 0) out.push_back(std::move(p));
      continue;
    }
    split_one(p, trie, out);
  }
  pieces = std::move(out);
}

}  // namespace fs::text

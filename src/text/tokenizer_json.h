#pragma once
// Reads tokenizer.json in one pass: the large model.vocab and model.merges go straight into compact tables, the
// rest (normalizer, pre_tokenizer, added_tokens, ...) into JSON values.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/bpe_vocab.h"

namespace fs::text {

struct TokenizerFile {
  nlohmann::json fields = nlohmann::json::object();  // top-level fields; "model" lacks vocab and merges
  TokenTable vocab;
  bool has_vocab = false;
  bool has_merges = false;
  // Merge parts, in rank order, as (left, right) spans of merge_text.
  std::string merge_text;
  struct Merge {
    uint32_t offset;
    uint32_t left_size;
    uint32_t right_size;
  };
  std::vector<Merge> merges;
  std::string_view left(const Merge& m) const { return {merge_text.data() + m.offset, m.left_size}; }
  std::string_view right(const Merge& m) const { return {merge_text.data() + m.offset + m.left_size, m.right_size}; }
};

// Parses the text of a tokenizer.json; throws fs::Error naming `origin` on malformed input.
TokenizerFile parse_tokenizer_json(std::string_view text, const std::string& origin);

}  // namespace fs::text

#pragma once
// UTF-8 helpers: decoding, lossy repair, Unicode classes and normalization forms used by the tokenizer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fs::text {

constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the code point at s[i] and advances i; s must be valid UTF-8 (see repair_utf8).
char32_t next_code_point(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t cp);
// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not one.
size_t valid_sequence_length(std::string_view s, size_t i);
bool is_valid_utf8(std::string_view s);
// Replaces each maximal invalid subsequence by U+FFFD, as Python's errors="replace" does.
std::string repair_utf8(std::string_view s);
// Bytes of s up to the last character that is complete (a truncated trailing sequence is left out).
size_t complete_utf8_prefix(std::string_view s);

// Unicode White_Space (Rust char::is_whitespace).
bool is_whitespace(char32_t c);
// Regex \w: letters, marks, decimal digits, connector punctuation, joiners.
bool is_word_char(char32_t c);
// Rust char::is_numeric: categories Nd, Nl, No.
bool is_numeric(char32_t c);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalize_unicode(std::string_view s, NormalForm form);
std::string to_lowercase(std::string_view s);

}  // namespace fs::text

#pragma once
// Splits template text into tokens exactly as Jinja2's lexer does with trim_blocks and lstrip_blocks on:
// data between tags, tag delimiters, and the names, literals and operators inside tags.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fs::jinja {

enum class Tok : uint8_t { Data, BlockBegin, BlockEnd, VarBegin, VarEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string text;  // data text, name, decoded string literal, or operator
  int64_t ival = 0;
  double fval = 0;
  int line = 1;
};

// Throws TemplateError ("line N: ...") on an unterminated tag, comment, string or raw block.
std::vector<Token> tokenize(std::string_view source);

}  // namespace fs::jinja

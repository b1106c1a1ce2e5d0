#pragma once
// A regular expression (a simple subset) compiled into grammar rules over UTF-8 bytes.
//
// Supported: literals (UTF-8), `.`, classes `[...]` / `[^...]` with ASCII ranges and single non-ASCII characters,
// escapes \d \D \w \W \s \S \n \r \t \f \v \xHH \uHHHH and escaped punctuation, groups `(...)`, `(?:...)`,
// `(?<name>...)`, `(?P<name>...)`, alternation `|`, quantifiers `* + ? {n} {n,} {n,m}` (a lazy `?` suffix is accepted:
// it does not change what matches), `^` at the start and `$` at the end. The whole text must match.
// Refused (fs::Error naming it): backreferences, lookaround, \b \B, possessive quantifiers, non-ASCII class ranges,
// counts above 1000.
#include <string_view>

#include "text/structured/grammar.h"

namespace fs::structured {

struct RegexOptions {
  // Match inside a JSON string: `"`, `\` and control characters are produced as JSON escapes.
  bool json_string = false;
  // Allow any characters before/after the match unless the pattern anchors that end with ^ / $ (JSON Schema's
  // "pattern" is a search).
  bool search = false;
};

// A sequence matching `pattern` under `options`. Throws fs::Error with the reason when the pattern is refused.
Seq compile_regex(GrammarBuilder& b, std::string_view pattern, const RegexOptions& options);

// The grammar elements shared with the JSON compiler: one JSON string character (plain or escaped), and any one
// UTF-8 character whose first byte is not ASCII.
Sym json_string_char(GrammarBuilder& b);
Sym utf8_non_ascii_char(GrammarBuilder& b);

}  // namespace fs::structured

#pragma once
// A compiled PCRE2 pattern (UTF, Unicode properties, JIT) for the Oniguruma patterns found in tokenizer.json.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fs::text {

using Span = std::pair<size_t, size_t>;  // byte range [first, second)

class Regex {
 public:
  // Compiles an Oniguruma-syntax pattern; throws fs::Error when it cannot be converted or compiled.
  explicit Regex(std::string_view oniguruma_pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(start, end) for each non-empty, non-overlapping match in s (valid UTF-8), left to right.
  template <typename F>
  void for_each_match(std::string_view s, F&& on_match) const {
    size_t pos = 0;
    Span m;
    while (next_match(s, pos, m)) on_match(m.first, m.second);
  }
  // Appends the matches to out.
  void find_all(std::string_view s, std::vector<Span>& out) const {
    for_each_match(s, [&](size_t a, size_t b) { out.emplace_back(a, b); });
  }
  const std::string& pattern() const { return pattern_; }

 private:
  // The first non-empty match at or after pos; advances pos past it.
  bool next_match(std::string_view s, size_t& pos, Span& match) const;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

// A compiled pattern shared by every tokenizer that uses the same pattern text (compiled once per process).
std::shared_ptr<const Regex> compile_regex(std::string_view oniguruma_pattern);

// Oniguruma (Ruby syntax) → PCRE2: \h/\H are hex digits there, anchors are line anchors.
std::string oniguruma_to_pcre2(std::string_view pattern);
// Escapes s so that it matches literally.
std::string regex_escape(std::string_view s);

}  // namespace fs::text

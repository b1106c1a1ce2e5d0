#include "text/pcre_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <map>
#include <mutex>

#include "core/error.h"

namespace fs::text {

std::string oniguruma_to_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char n = p[++i];
      if (n == 'h') {
        out += in_class ? "0-9a-fA-F" : "[0-9a-fA-F]";
      } else if (n == 'H') {
        out += in_class ? "\\x00-\\x2F\\x3A-\\x40\\x47-\\x60\\x67-\\x{10FFFF}" : "[^0-9a-fA-F]";
      } else {
        out += '\\';
        out += n;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += "\\]", ++i;
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

std::string regex_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}-#&~ \t\n\r").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

Regex::Regex(std::string_view pattern) : pattern_(oniguruma_to_pcre2(pattern)) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error("cannot compile pre-tokenizer regex '" + std::string(pattern) + "' at offset " +
                std::to_string(offset) + ": " + reinterpret_cast<char*>(msg));
  }
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  code_ = code;
}

std::shared_ptr<const Regex> compile_regex(std::string_view pattern) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const Regex>, std::less<>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(pattern);
  if (it != cache.end())
    if (auto live = it->second.lock()) return live;
  auto compiled = std::make_shared<const Regex>(pattern);
  cache[std::string(pattern)] = compiled;
  return compiled;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

namespace {

// Per-thread match state: one ovector pair is all find_all reads; a larger JIT stack for long inputs.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

}  // namespace

bool Regex::next_match(std::string_view s, size_t& pos, Span& match) const {
  auto* code = static_cast<pcre2_code*>(code_);
  auto& st = match_state();
  auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  while (pos <= s.size()) {
    int rc = jit_ ? pcre2_jit_match(code, subject, s.size(), pos, 0, st.data, st.context)
                  : pcre2_match(code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, st.data, st.context);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error(std::string("pre-tokenizer regex failed: ") + reinterpret_cast<char*>(msg));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    size_t start = ov[0], end = ov[1];
    if (end > start) {
      match = {start, end};
      pos = end;
      return true;
    }
    // Empty match: step over one character.
    if (start >= s.size()) return false;
    pos = start + 1;
    while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) ++pos;
  }
  return false;
}

}  // namespace fs::text

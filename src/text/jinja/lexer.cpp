#include "text/jinja/lexer.h"

#include <cstdlib>

#include "text/jinja/error.h"
#include "text/jinja/pystr.h"

namespace fs::jinja {
namespace {

bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? true : c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Jinja2 joins the source's lines with "\n" and drops one trailing newline.
std::string normalize_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      out += '\n';
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool all_space(std::string_view s) {
  if (s.empty()) return false;
  for (char32_t c : utf8_decode(s))
    if (!py_isspace(c)) return false;
  return true;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) root_step();
    push(Tok::Eof, "");
    return std::move(out_);
  }

 private:
  std::string src_;
  size_t pos_ = 0;
  std::vector<Token> out_;
  int line_ = 1;
  size_t line_counted_ = 0;

  int line_at(size_t p) {
    for (; line_counted_ < p && line_counted_ < src_.size(); ++line_counted_)
      if (src_[line_counted_] == '\n') ++line_;
    return line_;
  }

  [[noreturn]] void fail(size_t p, const std::string& msg) {
    throw TemplateError("template syntax error at line " + std::to_string(line_at(p)) + ": " + msg);
  }

  void push(Tok t, std::string text, size_t at = std::string::npos) {
    Token tok{t, std::move(text)};
    tok.line = line_at(at == std::string::npos ? pos_ : at);
    out_.push_back(std::move(tok));
  }

  bool starts(size_t p, std::string_view s) const { return src_.compare(p, s.size(), s) == 0; }

  // lstrip_blocks / "-" handling of the data in front of a tag.
  std::string strip_before(std::string text, char sign, bool variable, bool line_starting) {
    if (sign == '-') return py_strip(text, nullptr, false, true);
    if (sign != '+' && !variable) {
      size_t l_pos = text.rfind('\n');
      l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
      if ((l_pos > 0 || line_starting) && all_space(std::string_view(text).substr(l_pos))) text.resize(l_pos);
    }
    return text;
  }

  // Matches `{%[-+]? raw %}` (or endraw) at p; returns the position after it and its inner sign.
  bool match_raw_tag(size_t p, std::string_view word, size_t& end, char& sign, bool trim_newline) {
    if (!starts(p, "{%")) return false;
    size_t q = p + 2;
    sign = 0;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
    while (q < src_.size() && is_space(src_[q])) ++q;
    if (!starts(q, word)) return false;
    q += word.size();
    while (q < src_.size() && is_space(src_[q])) ++q;
    if (starts(q, "-%}")) {
      q += 3;
      while (q < src_.size() && is_space(src_[q])) ++q;
    } else if (trim_newline && starts(q, "+%}")) {
      q += 3;
    } else if (starts(q, "%}")) {
      q += 2;
      if (trim_newline && q < src_.size() && src_[q] == '\n') ++q;
    } else {
      return false;
    }
    end = q;
    return true;
  }

  void root_step() {
    bool line_starting = pos_ == 0 || src_[pos_ - 1] == '\n';
    size_t start = pos_;
    size_t tag = std::string::npos;
    for (size_t p = src_.find('{', pos_); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) {
        tag = p;
        break;
      }
    }
    if (tag == std::string::npos) {
      push(Tok::Data, src_.substr(start), start);
      pos_ = src_.size();
      return;
    }
    char kind = src_[tag + 1];
    char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
    std::string text = strip_before(src_.substr(start, tag - start), sign, kind == '{', line_starting);
    if (!text.empty()) push(Tok::Data, std::move(text), start);
    size_t after = tag + 2 + (sign ? 1 : 0);
    size_t raw_end;
    char raw_sign;
    if (kind == '%' && match_raw_tag(tag, "raw", raw_end, raw_sign, false)) {
      lex_raw(raw_end);
    } else if (kind == '#') {
      lex_comment(after);
    } else {
      pos_ = tag;
      push(kind == '%' ? Tok::BlockBegin : Tok::VarBegin, "", tag);
      pos_ = after;
      lex_tag(kind == '%');
    }
  }

  void lex_raw(size_t body) {
    for (size_t p = src_.find("{%", body); p != std::string::npos; p = src_.find("{%", p + 1)) {
      size_t end;
      char sign;
      if (!match_raw_tag(p, "endraw", end, sign, true)) continue;
      bool line_starting = src_[body - 1] == '\n';
      std::string text = strip_before(src_.substr(body, p - body), sign, false, line_starting);
      if (!text.empty()) push(Tok::Data, std::move(text), body);
      pos_ = end;
      return;
    }
    fail(body, "missing end of raw directive");
  }

  void lex_comment(size_t body) {
    size_t q = src_.find("#}", body);
    if (q == std::string::npos) fail(body, "missing end of comment tag");
    size_t end = q + 2;
    if (q > body && src_[q - 1] == '-') {
      while (end < src_.size() && is_space(src_[end])) ++end;
    } else if (q > body && src_[q - 1] == '+') {
    } else if (end < src_.size() && src_[end] == '\n') {
      ++end;
    }
    pos_ = end;
  }

  // Tokens inside {% %} or {{ }} up to the closing delimiter.
  void lex_tag(bool block) {
    int depth = 0;  // open brackets: a closing delimiter inside them is an operator
    size_t begin = pos_;
    while (true) {
      if (pos_ >= src_.size()) fail(begin, block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
      if (depth == 0 && try_tag_end(block)) return;
      char c = src_[pos_];
      if (is_space(c)) {
        ++pos_;
        continue;
      }
      if (is_digit(c)) {
        lex_number();
        continue;
      }
      if (is_name_start(c)) {
        size_t s = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        push(Tok::Name, src_.substr(s, pos_ - s), s);
        continue;
      }
      if (c == '\'' || c == '"') {
        lex_string();
        continue;
      }
      static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
      std::string op;
      for (const char* t : two)
        if (starts(pos_, t)) op = t;
      if (op.empty()) {
        if (std::string_view("+-/*%~[](){}<>=.:|,;").find(c) == std::string_view::npos)
          fail(pos_, std::string("unexpected char '") + c + "'");
        op = std::string(1, c);
      }
      if (op == "(" || op == "[" || op == "{") ++depth;
      if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
      push(Tok::Op, op, pos_);
      pos_ += op.size();
    }
  }

  bool try_tag_end(bool block) {
    size_t q = pos_;
    if (block) {
      if (starts(q, "-%}")) {
        q += 3;
        while (q < src_.size() && is_space(src_[q])) ++q;
      } else if (starts(q, "+%}")) {
        q += 3;
      } else if (starts(q, "%}")) {
        q += 2;
        if (q < src_.size() && src_[q] == '\n') ++q;
      } else {
        return false;
      }
      push(Tok::BlockEnd, "", pos_);
    } else {
      if (starts(q, "-}}")) {
        q += 3;
        while (q < src_.size() && is_space(src_[q])) ++q;
      } else if (starts(q, "}}")) {
        q += 2;
      } else {
        return false;
      }
      push(Tok::VarEnd, "", pos_);
    }
    pos_ = q;
    return true;
  }

  void lex_number() {
    size_t s = pos_;
    auto digits = [&] {
      size_t d = pos_;
      while (pos_ < src_.size() && (is_digit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() &&
                                                            is_digit(src_[pos_ + 1]) && pos_ > d)))
        ++pos_;
      return pos_ > d;
    };
    if (src_[pos_] == '0' && pos_ + 1 < src_.size() && std::string_view("xXoObB").find(src_[pos_ + 1]) != std::string_view::npos) {
      char base_c = src_[pos_ + 1] | 0x20;
      int base = base_c == 'x' ? 16 : base_c == 'o' ? 8 : 2;
      pos_ += 2;
      std::string text;
      while (pos_ < src_.size() && (std::isxdigit((unsigned char)src_[pos_]) || src_[pos_] == '_')) {
        if (src_[pos_] != '_') text += src_[pos_];
        ++pos_;
      }
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(text.c_str(), &end, base);
      if (text.empty() || *end || errno) fail(s, "invalid integer literal");
      Token t{Tok::Int, src_.substr(s, pos_ - s)};
      t.ival = v;
      t.line = line_at(s);
      out_.push_back(std::move(t));
      return;
    }
    digits();
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      ++pos_;
      digits();
      is_float = true;
    }
    if (pos_ < src_.size() && (src_[pos_] | 0x20) == 'e') {
      size_t save = pos_++;
      if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) ++pos_;
      if (digits()) is_float = true;
      else pos_ = save;
    }
    std::string text;
    for (size_t k = s; k < pos_; ++k)
      if (src_[k] != '_') text += src_[k];
    Token t{is_float ? Tok::Float : Tok::Int, src_.substr(s, pos_ - s)};
    t.line = line_at(s);
    if (is_float) {
      t.fval = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.ival = std::strtoll(text.c_str(), nullptr, 10);
      if (errno) fail(s, "integer literal too large");
    }
    out_.push_back(std::move(t));
  }

  void lex_string() {
    char quote = src_[pos_];
    size_t s = pos_++;
    std::string value;
    while (true) {
      if (pos_ >= src_.size()) fail(s, "unterminated string");
      char c = src_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (pos_ >= src_.size()) fail(s, "unterminated string");
      char e = src_[pos_++];
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': break;
        case 'x': case 'u': case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > src_.size()) fail(s, "truncated \\" + std::string(1, e) + " escape");
          std::string hex = src_.substr(pos_, n);
          for (char h : hex)
            if (!std::isxdigit((unsigned char)h)) fail(s, "truncated \\" + std::string(1, e) + " escape");
          unsigned long cp = std::strtoul(hex.c_str(), nullptr, 16);
          if (cp > 0x10ffff) fail(s, "illegal Unicode character");
          utf8_append(value, char32_t(cp));
          pos_ += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            unsigned cp = e - '0';
            for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k)
              cp = cp * 8 + (src_[pos_++] - '0');
            utf8_append(value, char32_t(cp));
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    push(Tok::String, std::move(value), s);
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace fs::jinja

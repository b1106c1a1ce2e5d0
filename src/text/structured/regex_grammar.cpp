#include "text/structured/regex_grammar.h"

#include <string>

#include "core/error.h"

namespace fs::structured {

namespace {

ByteSet range(int lo, int hi) {
  ByteSet s;
  s.add_range(lo, hi);
  return s;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

// A character class: ASCII members as a byte set, non-ASCII members as whole UTF-8 strings, or every non-ASCII
// character (negated classes, `.`, \W, \S, \D).
struct CharClass {
  ByteSet ascii;
  std::vector<std::string> wide;
  bool all_wide = false;
};

class RegexParser {
 public:
  RegexParser(GrammarBuilder& b, std::string_view p, const RegexOptions& o) : b_(b), p_(p), o_(o) {}

  Seq parse() {
    bool anchored_start = eat('^');
    Seq body = alternation();
    if (i_ != p_.size()) fail("unexpected ')'");
    Seq out;
    Sym any = o_.json_string ? json_string_char(b_) : any_char_sym();
    if (o_.search && !anchored_start) out.push_back(b_.star({any}));
    append(out, body);
    if (o_.search && !anchored_end_) out.push_back(b_.star({any}));
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("regex '" + std::string(p_) + "' at offset " + std::to_string(i_) + ": " + why);
  }
  bool eat(char c) {
    if (i_ < p_.size() && p_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool at_end() const { return i_ >= p_.size(); }

  Seq alternation() {
    std::vector<Seq> alts{concatenation()};
    while (eat('|')) alts.push_back(concatenation());
    if (alts.size() == 1) return std::move(alts[0]);
    return {b_.any_of(std::move(alts))};
  }

  Seq concatenation() {
    Seq out;
    while (!at_end() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$') {
        ++i_;
        if (!at_end()) fail("'$' is supported only at the end");
        anchored_end_ = true;
        break;
      }
      Seq atom_seq = atom();
      append(out, quantified(std::move(atom_seq)));
    }
    return out;
  }

  int number() {
    int n = 0, digits = 0;
    while (!at_end() && p_[i_] >= '0' && p_[i_] <= '9') {
      n = n * 10 + (p_[i_++] - '0');
      if (n > 1000) fail("repetition counts above 1000 are not supported");
      ++digits;
    }
    if (digits == 0) fail("expected a number in {}");
    return n;
  }

  Seq quantified(Seq atom) {
    int min = 1, max = 1;
    if (eat('*')) min = 0, max = -1;
    else if (eat('+')) min = 1, max = -1;
    else if (eat('?')) min = 0, max = 1;
    else if (!at_end() && p_[i_] == '{') {
      ++i_;
      min = max = number();
      if (eat(',')) max = (!at_end() && p_[i_] == '}') ? -1 : number();
      if (!eat('}')) fail("expected '}'");
      if (max >= 0 && max < min) fail("{n,m} with m < n");
    } else {
      return atom;
    }
    if (eat('+')) fail("possessive quantifiers are not supported");
    eat('?');  // lazy: the same language
    return b_.repeat(atom, min, max);
  }

  Seq atom() {
    const char c = p_[i_++];
    if (c == '(') {
      if (eat('?')) {
        if (eat(':')) {
        } else if (eat('<') || (eat('P') && eat('<'))) {
          if (!at_end() && (p_[i_] == '=' || p_[i_] == '!')) fail("lookbehind is not supported");
          while (!at_end() && p_[i_] != '>') ++i_;
          if (!eat('>')) fail("unterminated group name");
        } else {
          fail("lookaround and inline flags are not supported");
        }
      }
      Seq inner = alternation();
      if (!eat(')')) fail("missing ')'");
      return {b_.any_of({std::move(inner)})};
    }
    if (c == '[') return emit(char_class());
    if (c == '.') {
      CharClass cc;
      cc.ascii = range(0, 127);
      cc.ascii.bits[0] &= ~(uint64_t(1) << '\n');
      cc.all_wide = true;
      return emit(cc);
    }
    if (c == '\\') return emit(escape(false));
    if (c == '*' || c == '+' || c == '?' || c == '{') fail(std::string("nothing to repeat before '") + c + "'");
    if (c == '^') fail("'^' is supported only at the start");
    CharClass cc;
    --i_;
    add_literal_char(cc);
    return emit(cc);
  }

  // The next (possibly multi-byte) character of the pattern into `cc`; returns its code point.
  uint32_t add_literal_char(CharClass& cc) {
    const uint8_t lead = uint8_t(p_[i_]);
    if (lead < 0x80) {
      ++i_;
      cc.ascii.add(lead);
      return lead;
    }
    size_t n = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
    if (i_ + n > p_.size()) fail("invalid UTF-8");
    cc.wide.emplace_back(p_.substr(i_, n));
    i_ += n;
    return 0x80;
  }

  CharClass escape(bool in_class) {
    if (at_end()) fail("trailing backslash");
    const char c = p_[i_++];
    CharClass cc;
    auto word = [&](CharClass& k) {
      k.ascii.add_range('a', 'z');
      k.ascii.add_range('A', 'Z');
      k.ascii.add_range('0', '9');
      k.ascii.add('_');
    };
    auto space = [&](CharClass& k) {
      for (char s : std::string(" \t\n\r\f\v")) k.ascii.add(uint8_t(s));
    };
    auto negate = [&](CharClass& k) {
      for (auto& w : k.ascii.bits) w = ~w;
      k.ascii.bits[2] = k.ascii.bits[3] = 0;
      k.all_wide = true;
    };
    switch (c) {
      case 'd': cc.ascii.add_range('0', '9'); break;
      case 'D': cc.ascii.add_range('0', '9'); negate(cc); break;
      case 'w': word(cc); break;
      case 'W': word(cc); negate(cc); break;
      case 's': space(cc); break;
      case 'S': space(cc); negate(cc); break;
      case 'n': cc.ascii.add('\n'); break;
      case 'r': cc.ascii.add('\r'); break;
      case 't': cc.ascii.add('\t'); break;
      case 'f': cc.ascii.add('\f'); break;
      case 'v': cc.ascii.add('\v'); break;
      case 'x':
      case 'u': {
        size_t n = c == 'x' ? 2 : 4;
        if (i_ + n > p_.size()) fail(std::string("\\") + c + " needs " + std::to_string(n) + " hex digits");
        uint32_t cp = 0;
        for (char h : p_.substr(i_, n)) {
          const int digit = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                          : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (digit < 0) fail(std::string("\\") + c + " needs " + std::to_string(n) + " hex digits");
          cp = cp * 16 + uint32_t(digit);
        }
        i_ += n;
        std::string s;
        append_utf8(s, cp);
        if (cp < 0x80) cc.ascii.add(uint8_t(cp));
        else cc.wide.push_back(s);
        break;
      }
      case 'b':
        if (in_class) {
          cc.ascii.add('\b');
          break;
        }
        [[fallthrough]];
      case 'B': fail("word boundaries (\\b, \\B) are not supported");
      default:
        if ((c >= '0' && c <= '9') || c == 'k') fail("backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) fail(std::string("unknown escape \\") + c);
        --i_;
        add_literal_char(cc);
    }
    return cc;
  }

  CharClass char_class() {
    CharClass cc;
    const bool negated = eat('^');
    bool first = true;
    while (true) {
      if (at_end()) fail("missing ']'");
      if (p_[i_] == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      CharClass item;
      uint32_t lo = 0;
      bool single = true;
      if (p_[i_] == '\\') {
        ++i_;
        item = escape(true);
        single = item.wide.size() + size_t(popcount(item.ascii)) == 1 && !item.all_wide;
        if (single) lo = item.wide.empty() ? first_bit(item.ascii) : 0x80;
      } else {
        lo = add_literal_char(item);
      }
      if (single && i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        CharClass hi_item;
        uint32_t hi = p_[i_] == '\\' ? (++i_, first_bit((hi_item = escape(true)).ascii)) : add_literal_char(hi_item);
        if (lo >= 0x80 || hi >= 0x80 || !hi_item.wide.empty()) fail("non-ASCII ranges in a class are not supported");
        if (hi < lo) fail("a class range runs backwards");
        item.ascii.add_range(int(lo), int(hi));
      }
      for (int w = 0; w < 4; ++w) cc.ascii.bits[size_t(w)] |= item.ascii.bits[size_t(w)];
      cc.wide.insert(cc.wide.end(), item.wide.begin(), item.wide.end());
      cc.all_wide = cc.all_wide || item.all_wide;
    }
    if (negated) {
      if (!cc.wide.empty()) fail("negated classes with non-ASCII members are not supported");
      const bool had_all_wide = cc.all_wide;
      for (auto& w : cc.ascii.bits) w = ~w;
      cc.ascii.bits[2] = cc.ascii.bits[3] = 0;
      cc.all_wide = !had_all_wide;
    }
    return cc;
  }

  static int popcount(const ByteSet& s) {
    int n = 0;
    for (int v = 0; v < 256; ++v) n += s.has(uint8_t(v));
    return n;
  }
  static uint32_t first_bit(const ByteSet& s) {
    for (int v = 0; v < 256; ++v)
      if (s.has(uint8_t(v))) return uint32_t(v);
    return 0;
  }

  Sym any_char_sym() {
    CharClass cc;
    cc.ascii = range(0, 127);
    cc.all_wide = true;
    Seq s = emit(cc);
    return s[0];
  }

  // One symbol matching one character of `cc` (as JSON string content when asked).
  Seq emit(const CharClass& cc) {
    std::vector<Seq> alts;
    ByteSet plain;
    for (int v = 0; v < 128; ++v) {
      if (!cc.ascii.has(uint8_t(v))) continue;
      if (!o_.json_string || (v >= 0x20 && v != '"' && v != '\\')) {
        plain.add(uint8_t(v));
        continue;
      }
      static const std::string kEscaped = "\"\\\n\r\t\b\f", kLetters = "\"\\nrtbf";
      if (size_t k = kEscaped.find(char(v)); k != std::string::npos)
        alts.push_back(b_.literal(std::string("\\") + kLetters[k]));
    }
    if (!plain.empty()) alts.push_back({b_.set(plain)});
    for (const auto& w : cc.wide) alts.push_back(b_.literal(w));
    if (cc.all_wide) alts.push_back({utf8_non_ascii_char(b_)});
    if (alts.empty()) fail("a class that matches nothing");
    if (alts.size() == 1 && alts[0].size() == 1) return alts[0];
    return {b_.any_of(std::move(alts))};
  }

  GrammarBuilder& b_;
  std::string_view p_;
  RegexOptions o_;
  size_t i_ = 0;
  bool anchored_end_ = false;
};

}  // namespace

Sym utf8_non_ascii_char(GrammarBuilder& b) {
  const Sym cont = b.set(range(0x80, 0xbf));
  ByteSet e_mid;
  e_mid.add_range(0xe1, 0xec);
  e_mid.add_range(0xee, 0xef);
  return b.any_of({
      {b.set(range(0xc2, 0xdf)), cont},
      {b.byte(0xe0), b.set(range(0xa0, 0xbf)), cont},
      {b.set(e_mid), cont, cont},
      {b.byte(0xed), b.set(range(0x80, 0x9f)), cont},
      {b.byte(0xf0), b.set(range(0x90, 0xbf)), cont, cont},
      {b.set(range(0xf1, 0xf3)), cont, cont, cont},
      {b.byte(0xf4), b.set(range(0x80, 0x8f)), cont, cont},
  });
}

Sym json_string_char(GrammarBuilder& b) {
  ByteSet plain = range(0x20, 0x7f);
  ByteSet quote_backslash;
  quote_backslash.add('"');
  quote_backslash.add('\\');
  for (int w = 0; w < 4; ++w) plain.bits[size_t(w)] &= ~quote_backslash.bits[size_t(w)];
  ByteSet simple_escape;
  for (char c : std::string("\"\\/bfnrt")) simple_escape.add(uint8_t(c));
  ByteSet hex, hex_no_d;
  hex.add_range('0', '9');
  hex.add_range('a', 'f');
  hex.add_range('A', 'F');
  hex_no_d = hex;
  hex_no_d.bits[1] &= ~((uint64_t(1) << ('d' - 64)) | (uint64_t(1) << ('D' - 64)));
  ByteSet d_letter, low_oct;
  d_letter.add('d');
  d_letter.add('D');
  low_oct.add_range('0', '7');
  const Sym h = b.set(hex);
  // \uXXXX outside the surrogate range D800-DFFF, so every escape names a whole character.
  const Sym unicode = b.any_of({{b.set(hex_no_d), h, h, h}, {b.set(d_letter), b.set(low_oct), h, h}});
  const Sym escape = b.any_of({{b.set(simple_escape)}, {b.byte('u'), unicode}});
  return b.any_of({{b.set(plain)}, {b.byte('\\'), escape}, {utf8_non_ascii_char(b)}});
}

Seq compile_regex(GrammarBuilder& b, std::string_view pattern, const RegexOptions& options) {
  return RegexParser(b, pattern, options).parse();
}

}  // namespace fs::structured

#include "text/tokenizer_json.h"

#include "core/error.h"
#include "text/utf8.h"

namespace fs::text {
namespace {

class Scanner {
 public:
  Scanner(std::string_view text, const std::string& origin)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), origin_(origin) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(origin_ + ": malformed JSON at byte " + std::to_string(p_ - begin_) + ": " + what);
  }
  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  char peek() {
    ws();
    if (p_ >= end_) fail("unexpected end of input");
    return *p_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++p_;
  }
  // True and consumes when the next character is c.
  bool accept(char c) {
    if (peek() != c) return false;
    ++p_;
    return true;
  }
  bool at_end() {
    ws();
    return p_ >= end_;
  }

  // A JSON string; returns a view of the raw bytes when there are no escapes, else decodes into scratch.
  std::string_view string(std::string& scratch) {
    expect('"');
    const char* start = p_;
    while (p_ < end_ && *p_ != '"' && *p_ != '\\') {
      if (static_cast<unsigned char>(*p_) < 0x20) fail("control character in string");
      ++p_;
    }
    if (p_ >= end_) fail("unterminated string");
    if (*p_ == '"') return {start, static_cast<size_t>(p_++ - start)};
    scratch.assign(start, p_);
    while (true) {
      if (p_ >= end_) fail("unterminated string");
      char c = *p_++;
      if (c == '"') return scratch;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        scratch += c;
        continue;
      }
      if (p_ >= end_) fail("unterminated escape");
      char e = *p_++;
      switch (e) {
        case '"': scratch += '"'; break;
        case '\\': scratch += '\\'; break;
        case '/': scratch += '/'; break;
        case 'b': scratch += '\b'; break;
        case 'f': scratch += '\f'; break;
        case 'n': scratch += '\n'; break;
        case 'r': scratch += '\r'; break;
        case 't': scratch += '\t'; break;
        case 'u': {
          char32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (end_ - p_ < 6 || p_[0] != '\\' || p_[1] != 'u') fail("lone surrogate");
            p_ += 2;
            char32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("lone surrogate");
          }
          append_utf8(scratch, cp);
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  int64_t integer() {
    ws();
    bool neg = p_ < end_ && *p_ == '-';
    if (neg) ++p_;
    if (p_ >= end_ || *p_ < '0' || *p_ > '9') fail("expected an integer");
    int64_t v = 0;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
      v = v * 10 + (*p_++ - '0');
      if (v > (1ll << 40)) fail("integer too large");
    }
    if (p_ < end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) fail("expected an integer");
    return neg ? -v : v;
  }

  // Skips one value and returns its text.
  std::string_view raw_value() {
    ws();
    const char* start = p_;
    int depth = 0;
    do {
      if (p_ >= end_) fail("unexpected end of input");
      char c = *p_;
      if (c == '"') {
        ++p_;
        while (p_ < end_ && *p_ != '"') p_ += (*p_ == '\\') ? 2 : 1;
        if (p_ >= end_) fail("unterminated string");
        ++p_;
      } else if (c == '{' || c == '[') {
        ++depth, ++p_;
      } else if (c == '}' || c == ']') {
        if (--depth < 0) fail("unbalanced brackets");
        ++p_;
      } else {
        ++p_;
        if (depth == 0)
          while (p_ < end_ && *p_ != ',' && *p_ != '}' && *p_ != ']' && *p_ != ' ' && *p_ != '\n' && *p_ != '\r' &&
                 *p_ != '\t')
            ++p_;
      }
    } while (depth > 0);
    return {start, static_cast<size_t>(p_ - start)};
  }

  nlohmann::json value() {
    std::string_view raw = raw_value();
    try {
      return nlohmann::json::parse(raw.begin(), raw.end());
    } catch (const nlohmann::json::exception& e) {
      fail(e.what());
    }
  }

 private:
  char32_t hex4() {
    if (end_ - p_ < 4) fail("short \\u escape");
    char32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = *p_++;
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) fail("bad \\u escape");
      v = v * 16 + static_cast<char32_t>(d);
    }
    return v;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  const std::string& origin_;
};

void read_vocab(Scanner& in, TokenizerFile& file) {
  std::string scratch;
  in.expect('{');
  file.vocab.reserve(1024);
  if (in.accept('}')) return;
  do {
    std::string_view token = in.string(scratch);
    in.expect(':');
    int64_t id = in.integer();
    if (id < 0 || id > INT32_MAX) in.fail("token id out of range");
    file.vocab.add(token, static_cast<int32_t>(id));
  } while (in.accept(','));
  in.expect('}');
}

void add_merge(Scanner& in, TokenizerFile& file, std::string_view left, std::string_view right) {
  if (file.merge_text.size() + left.size() + right.size() > 0xFFFFFFFFull) in.fail("merges too large");
  file.merges.push_back({static_cast<uint32_t>(file.merge_text.size()), static_cast<uint32_t>(left.size()),
                         static_cast<uint32_t>(right.size())});
  file.merge_text.append(left).append(right);
}

void read_merges(Scanner& in, TokenizerFile& file) {
  std::string a, b;
  in.expect('[');
  if (in.accept(']')) return;
  do {
    if (in.peek() == '[') {
      in.expect('[');
      std::string_view left = in.string(a);
      std::string left_copy(left);
      in.expect(',');
      std::string_view right = in.string(b);
      in.expect(']');
      add_merge(in, file, left_copy, right);
    } else {
      std::string_view line = in.string(a);
      size_t space = line.find(' ');
      if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
        in.fail("merge '" + std::string(line) + "' is not two tokens separated by one space");
      add_merge(in, file, line.substr(0, space), line.substr(space + 1));
    }
  } while (in.accept(','));
  in.expect(']');
}

void read_model(Scanner& in, TokenizerFile& file) {
  std::string scratch;
  nlohmann::json model = nlohmann::json::object();
  in.expect('{');
  if (!in.accept('}')) {
    do {
      std::string key(in.string(scratch));
      in.expect(':');
      if (key == "vocab" && in.peek() == '{') {
        read_vocab(in, file);
        file.has_vocab = true;
      } else if (key == "merges" && in.peek() == '[') {
        read_merges(in, file);
        file.has_merges = true;
      } else {
        model[key] = in.value();
      }
    } while (in.accept(','));
    in.expect('}');
  }
  file.fields["model"] = std::move(model);
}

}  // namespace

TokenizerFile parse_tokenizer_json(std::string_view text, const std::string& origin) {
  TokenizerFile file;
  file.vocab.reserve_text(text.size() / 4);
  file.merge_text.reserve(text.size() / 4);
  Scanner in(text, origin);
  std::string scratch;
  in.expect('{');
  if (!in.accept('}')) {
    do {
      std::string key(in.string(scratch));
      in.expect(':');
      if (key == "model" && in.peek() == '{') read_model(in, file);
      else file.fields[key] = in.value();
    } while (in.accept(','));
    in.expect('}');
  }
  if (!in.at_end()) in.fail("trailing characters");
  return file;
}

}  // namespace fs::text

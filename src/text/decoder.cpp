#include "text/decoder.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/utf8.h"

namespace fs::text {
namespace {

// Byte-level characters back to bytes, then lossy UTF-8 over the whole sequence.
class ByteLevel : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens)
      if (!byte_level_to_bytes(t, bytes)) bytes += t;
    tokens.assign(1, repair_utf8(bytes));
  }
};

class Replace : public Decoder {
 public:
  Replace(std::string pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (pattern_.empty()) return;
    for (auto& t : tokens) {
      std::string out;
      size_t prev = 0;
      for (size_t at = t.find(pattern_); at != std::string::npos; at = t.find(pattern_, prev)) {
        out.append(t, prev, at - prev);
        out += content_;
        prev = at + pattern_.size();
      }
      if (prev == 0) continue;
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::string pattern_, content_;
};

// Runs of <0xXX> tokens become their bytes when those form valid UTF-8, else one U+FFFD per byte.
class ByteFallback : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (is_valid_utf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (auto& t : tokens) {
      int byte = parse_byte(t);
      if (byte >= 0) {
        pending += static_cast<char>(byte);
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int parse_byte(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    int hi = hex(t[3]), lo = hex(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
};

class Fuse : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from every token.
class Strip : public Decoder {
 public:
  Strip(std::string content, size_t start, size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (content_.empty()) return;
    for (auto& t : tokens) {
      size_t begin = 0, end = t.size();
      for (size_t k = 0; k < start_ && t.compare(begin, content_.size(), content_) == 0; ++k) begin += content_.size();
      for (size_t k = 0; k < stop_ && end >= begin + content_.size() &&
                         t.compare(end - content_.size(), content_.size(), content_) == 0;
           ++k)
        end -= content_.size();
      t = t.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

// The replacement character becomes a space; the first token loses them when a prefix space was added.
class Metaspace : public Decoder {
 public:
  Metaspace(std::string replacement, bool strip_first) : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (replacement_.empty()) return;
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      std::string out;
      size_t prev = 0;
      for (size_t at = t.find(replacement_); at != std::string::npos; at = t.find(replacement_, prev)) {
        out.append(t, prev, at - prev);
        if (!(i == 0 && strip_first_)) out += ' ';
        prev = at + replacement_.size();
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class Sequence : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec) {
  if (spec.is_null()) return nullptr;
  if (!spec.is_object() || !spec.contains("type")) throw Error("tokenizer.json: decoder without a type");
  std::string type = spec.at("type").get<std::string>();
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Replace") {
    const auto& pattern = spec.at("pattern");
    if (!pattern.contains("String")) throw Error("tokenizer.json: Replace decoder supports only string patterns");
    return std::make_unique<Replace>(pattern.at("String").get<std::string>(), spec.at("content").get<std::string>());
  }
  if (type == "Strip")
    return std::make_unique<Strip>(spec.at("content").get<std::string>(), spec.value("start", size_t{0}),
                                   spec.value("stop", size_t{0}));
  if (type == "Metaspace") {
    std::string scheme = spec.value("prepend_scheme", spec.value("add_prefix_space", true) ? "always" : "never");
    return std::make_unique<Metaspace>(spec.value("replacement", "\xE2\x96\x81"), scheme != "never");
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const auto& p : spec.at("decoders"))
      if (auto d = make_decoder(p)) parts.push_back(std::move(d));
    return std::make_unique<Sequence>(std::move(parts));
  }
  throw Error("tokenizer.json: unsupported decoder type '" + type + "'");
}

}  // namespace fs::text

#include "text/normalizer.h"

#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/pcre_regex.h"
#include "text/utf8.h"

namespace fs::text {
namespace {

class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(NormalForm form) : form_(form) {}
  void normalize(std::string& s) const override { s = normalize_unicode(s, form_); }

 private:
  NormalForm form_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string& s) const override { s = to_lowercase(s); }
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

// Replace: a literal string or a regex, every occurrence.
class Replace : public Normalizer {
 public:
  Replace(std::string literal, std::shared_ptr<const Regex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}
  void normalize(std::string& s) const override {
    std::string out;
    if (regex_) {
      std::vector<Span> spans;
      regex_->find_all(s, spans);
      if (spans.empty()) return;
      size_t prev = 0;
      for (auto [a, b] : spans) {
        out.append(s, prev, a - prev);
        out += content_;
        prev = b;
      }
      out.append(s, prev, std::string::npos);
    } else {
      if (literal_.empty()) return;
      size_t prev = 0, at = s.find(literal_);
      if (at == std::string::npos) return;
      for (; at != std::string::npos; at = s.find(literal_, prev)) {
        out.append(s, prev, at - prev);
        out += content_;
        prev = at + literal_.size();
      }
      out.append(s, prev, std::string::npos);
    }
    s = std::move(out);
  }

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
  std::string content_;
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& s) const override {
    size_t begin = 0, end = s.size();
    if (left_) {
      while (begin < end) {
        size_t i = begin;
        if (!is_whitespace(next_code_point(s, i))) break;
        begin = i;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        size_t i = start;
        if (!is_whitespace(next_code_point(s, i))) break;
        end = start;
      }
    }
    s = s.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& s) const override {
    for (const auto& p : parts_) p->normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec) {
  if (spec.is_null()) return nullptr;
  if (!spec.is_object() || !spec.contains("type")) throw Error("tokenizer.json: normalizer without a type");
  std::string type = spec.at("type").get<std::string>();
  if (type == "NFC") return std::make_unique<UnicodeForm>(NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeForm>(NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Prepend") return std::make_unique<Prepend>(spec.at("prepend").get<std::string>());
  if (type == "Strip") return std::make_unique<Strip>(spec.value("strip_left", true), spec.value("strip_right", true));
  if (type == "Replace") {
    const auto& pattern = spec.at("pattern");
    std::string content = spec.at("content").get<std::string>();
    if (pattern.contains("Regex"))
      return std::make_unique<Replace>("", compile_regex(pattern.at("Regex").get<std::string>()), content);
    return std::make_unique<Replace>(pattern.at("String").get<std::string>(), nullptr, content);
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const auto& p : spec.at("normalizers"))
      if (auto n = make_normalizer(p)) parts.push_back(std::move(n));
    return std::make_unique<Sequence>(std::move(parts));
  }
  throw Error("tokenizer.json: unsupported normalizer type '" + type + "'");
}

}  // namespace fs::text

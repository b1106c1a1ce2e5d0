#include "text/pre_tokenizer.h"

#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/utf8.h"

namespace fs::text {

void SegmentSplitter::feed(Span span, bool is_match) {
  switch (behavior_) {
    case SplitBehavior::Isolated:
      emit_(span);
      return;
    case SplitBehavior::Removed:
      if (!is_match) emit_(span);
      return;
    case SplitBehavior::Contiguous:
    case SplitBehavior::MergedWithPrevious: {
      bool merge = behavior_ == SplitBehavior::Contiguous ? is_match == previous_match_
                                                         : is_match && !previous_match_;
      if (merge && has_pending_) {
        pending_.second = span.second;
      } else {
        if (has_pending_) emit_(pending_);
        pending_ = span;
        has_pending_ = true;
      }
      previous_match_ = is_match;
      return;
    }
    case SplitBehavior::MergedWithNext:
      // A delimiter joins the segment after it when that one is not a delimiter too.
      if (has_pending_ && pending_is_match_ && !is_match) {
        emit_({pending_.first, span.second});
        has_pending_ = false;
        return;
      }
      if (has_pending_) emit_(pending_);
      if (is_match) {
        pending_ = span;
        has_pending_ = true;
        pending_is_match_ = true;
      } else {
        has_pending_ = false;
        emit_(span);
      }
      return;
  }
}

void SegmentSplitter::finish() {
  if (has_pending_) emit_(pending_);
  has_pending_ = false;
}

// Feeds the gaps and matches of a text to a splitter.
template <typename ForEachMatch>
static void feed_segments(size_t length, bool invert, SegmentSplitter& splitter, ForEachMatch&& for_each_match) {
  size_t prev = 0;
  for_each_match([&](size_t a, size_t b) {
    if (a != prev) splitter.feed({prev, a}, invert);
    splitter.feed({a, b}, !invert);
    prev = b;
  });
  if (prev != length) splitter.feed({prev, length}, invert);
  splitter.finish();
}

std::vector<Span> split_by_matches(size_t length, const std::vector<Span>& matches, SplitBehavior behavior,
                                   bool invert) {
  std::vector<Span> out;
  SegmentSplitter splitter(behavior, [&](Span s) { out.push_back(s); });
  feed_segments(length, invert, splitter, [&](auto&& on_match) {
    for (auto m : matches) on_match(m.first, m.second);
  });
  return out;
}

namespace {

// Emits the span [a, b) of `in` as a piece (dropping empty ones); only a span at offset 0 inherits at_start.
void emit_span(const Piece& in, Span span, const PieceSink& out) {
  if (span.second <= span.first) return;
  out(Piece{in.text.substr(span.first, span.second - span.first), -1, in.at_start && span.first == 0});
}

void emit_whole(Piece&& in, const PieceSink& out) {
  if (!in.text.empty()) out(std::move(in));
}

SplitBehavior parse_behavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  throw Error("tokenizer.json: unknown split behavior '" + name + "'");
}

template <typename F>
void for_each_literal(std::string_view s, std::string_view lit, F&& on_match) {
  if (lit.empty()) return;
  for (size_t at = s.find(lit); at != std::string_view::npos; at = s.find(lit, at + lit.size()))
    on_match(at, at + lit.size());
}

class Split : public PreTokenizer {
 public:
  Split(std::string literal, std::shared_ptr<const Regex> regex, SplitBehavior behavior, bool invert)
      : literal_(std::move(literal)), regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  void split(Piece&& in, const PieceSink& out) const override {
    SegmentSplitter splitter(behavior_, [&](Span span) { emit_span(in, span, out); });
    feed_segments(in.text.size(), invert_, splitter, [&](auto&& on_match) {
      if (regex_) regex_->for_each_match(in.text, on_match);
      else for_each_literal(in.text, literal_, on_match);
    });
  }

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
  SplitBehavior behavior_;
  bool invert_;
};

constexpr const char* kByteLevelPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_ = compile_regex(kByteLevelPattern);
  }
  void split(Piece&& in, const PieceSink& out) const override {
    if (add_prefix_space_ && (in.text.empty() || in.text[0] != ' ')) in.text.insert(0, " ");
    if (!regex_) {
      emit_whole(Piece{bytes_to_byte_level(in.text), -1, in.at_start}, out);
      return;
    }
    std::string_view text = in.text;
    SegmentSplitter splitter(SplitBehavior::Isolated, [&](Span span) {
      auto [a, b] = span;
      if (b > a) out(Piece{bytes_to_byte_level(text.substr(a, b - a)), -1, in.at_start && a == 0});
    });
    feed_segments(text.size(), false, splitter, [&](auto&& on_match) { regex_->for_each_match(text, on_match); });
  }

 private:
  bool add_prefix_space_;
  std::shared_ptr<const Regex> regex_;
};

class Metaspace : public PreTokenizer {
 public:
  enum class Prepend { Always, First, Never };
  Metaspace(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {}
  void split(Piece&& in, const PieceSink& out) const override {
    std::string text;
    text.reserve(in.text.size() + replacement_.size());
    for (char c : in.text) {
      if (c == ' ') text += replacement_;
      else text += c;
    }
    bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
    if (!starts && (prepend_ == Prepend::Always || (prepend_ == Prepend::First && in.at_start)))
      text.insert(0, replacement_);
    Piece whole{std::move(text), -1, in.at_start};
    if (!split_) {
      emit_whole(std::move(whole), out);
      return;
    }
    SegmentSplitter splitter(SplitBehavior::MergedWithNext, [&](Span span) { emit_span(whole, span, out); });
    feed_segments(whole.text.size(), false, splitter,
                  [&](auto&& on_match) { for_each_literal(whole.text, replacement_, on_match); });
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

// Splits on a per-character predicate: each matching character is one delimiter match.
class CharClassSplit : public PreTokenizer {
 public:
  CharClassSplit(bool (*is_delimiter)(char32_t), SplitBehavior behavior)
      : is_delimiter_(is_delimiter), behavior_(behavior) {}
  void split(Piece&& in, const PieceSink& out) const override {
    const std::string& s = in.text;
    SegmentSplitter splitter(behavior_, [&](Span span) { emit_span(in, span, out); });
    feed_segments(s.size(), false, splitter, [&](auto&& on_match) {
      for (size_t i = 0; i < s.size();) {
        size_t start = i;
        if (is_delimiter_(next_code_point(s, i))) on_match(start, i);
      }
    });
  }

 private:
  bool (*is_delimiter_)(char32_t);
  SplitBehavior behavior_;
};

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void split(Piece&& in, const PieceSink& out) const override { run(0, std::move(in), out); }

 private:
  void run(size_t k, Piece&& in, const PieceSink& out) const {
    if (k == parts_.size()) {
      out(std::move(in));
      return;
    }
    parts_[k]->split(std::move(in), [&](Piece&& p) { run(k + 1, std::move(p), out); });
  }
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& spec) {
  if (spec.is_null()) return nullptr;
  if (!spec.is_object() || !spec.contains("type")) throw Error("tokenizer.json: pre_tokenizer without a type");
  std::string type = spec.at("type").get<std::string>();
  if (type == "Split") {
    const auto& pattern = spec.at("pattern");
    auto behavior = parse_behavior(spec.at("behavior").get<std::string>());
    bool invert = spec.value("invert", false);
    if (pattern.contains("Regex"))
      return std::make_unique<Split>("", compile_regex(pattern.at("Regex").get<std::string>()), behavior,
                                     invert);
    return std::make_unique<Split>(pattern.at("String").get<std::string>(), nullptr, behavior, invert);
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevel>(spec.value("add_prefix_space", true), spec.value("use_regex", true));
  if (type == "Metaspace") {
    std::string scheme = spec.value("prepend_scheme", spec.value("add_prefix_space", true) ? "always" : "never");
    auto prepend = scheme == "first" ? Metaspace::Prepend::First
                   : scheme == "never" ? Metaspace::Prepend::Never
                                       : Metaspace::Prepend::Always;
    return std::make_unique<Metaspace>(spec.value("replacement", "\xE2\x96\x81"), prepend, spec.value("split", true));
  }
  if (type == "Digits") {
    bool individual = spec.value("individual_digits", false);
    return std::make_unique<CharClassSplit>(is_numeric,
                                            individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
  }
  if (type == "Whitespace")
    return std::make_unique<Split>("", compile_regex(R"(\w+|[^\w\s]+)"), SplitBehavior::Removed, true);
  if (type == "WhitespaceSplit")
    return std::make_unique<CharClassSplit>(is_whitespace, SplitBehavior::Removed);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (const auto& p : spec.at("pretokenizers"))
      if (auto n = make_pre_tokenizer(p)) parts.push_back(std::move(n));
    return std::make_unique<Sequence>(std::move(parts));
  }
  throw Error("tokenizer.json: unsupported pre_tokenizer type '" + type + "'");
}

}  // namespace fs::text

#pragma once
// tokenizer.json pre-tokenizers: Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence.
// Pieces stream through them one at a time, so a long input never becomes one long list of pieces.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "text/pcre_regex.h"

namespace fs::text {

// A stretch of text on its way to the model; id ≥ 0 once an added token claimed it.
struct Piece {
  std::string text;
  int32_t id = -1;
  bool at_start = false;  // begins at offset 0 of the input
};

using PieceSink = std::function<void(Piece&&)>;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits one unclaimed piece, passing each non-empty result to out in order.
  virtual void split(Piece&& in, const PieceSink& out) const = 0;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// Turns the alternating delimiter / non-delimiter segments of a text into the kept spans for one behavior, as
// the tokenizers library's split does, emitting each span as soon as it is final.
class SegmentSplitter {
 public:
  SegmentSplitter(SplitBehavior behavior, std::function<void(Span)> emit)
      : behavior_(behavior), emit_(std::move(emit)) {}
  void feed(Span span, bool is_match);
  void finish();

 private:
  SplitBehavior behavior_;
  std::function<void(Span)> emit_;
  Span pending_{0, 0};
  bool has_pending_ = false;
  bool pending_is_match_ = false;
  bool previous_match_ = false;
};

// Kept spans of a text of `length` bytes with the given delimiter matches (whole-list form of SegmentSplitter).
std::vector<Span> split_by_matches(size_t length, const std::vector<Span>& matches, SplitBehavior behavior,
                                   bool invert);

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& spec);

}  // namespace fs::text

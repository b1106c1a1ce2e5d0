#include "text/tokenizer.h"

#include "text/utf8.h"

namespace fs {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(tok), skip_special_(skip_special_tokens) {}

namespace {

bool ends_with_replacement(const std::string& s) { return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0; }

}  // namespace

std::string IncrementalDecoder::push(int32_t id) {
  ids_.push_back(id);
  std::vector<int32_t> window(ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_), ids_.end());
  std::vector<int32_t> prefix(ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_),
                              ids_.begin() + static_cast<std::ptrdiff_t>(read_offset_));
  std::string prefix_text = tok_.decode(prefix, skip_special_);
  std::string new_text = tok_.decode(window, skip_special_);
  // A trailing U+FFFD may be a character still missing bytes: wait for the next id.
  if (new_text.size() <= prefix_text.size() || ends_with_replacement(new_text)) return "";
  std::string out = new_text.substr(prefix_text.size());
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return out;
}

std::string IncrementalDecoder::flush() {
  if (read_offset_ == ids_.size()) return "";
  std::vector<int32_t> window(ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_), ids_.end());
  std::vector<int32_t> prefix(ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_),
                              ids_.begin() + static_cast<std::ptrdiff_t>(read_offset_));
  std::string prefix_text = tok_.decode(prefix, skip_special_);
  std::string new_text = tok_.decode(window, skip_special_);
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return new_text.size() > prefix_text.size() ? new_text.substr(prefix_text.size()) : "";
}

}  // namespace fs

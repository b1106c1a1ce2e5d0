#include "text/stop_matcher.h"

#include <algorithm>

namespace fs {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopMatcher::Step StopMatcher::push(std::string_view piece) {
  Step step;
  if (stopped_) return step;
  held_.append(piece);
  // Earliest stop wins; at equal positions the longer one.
  size_t best = std::string::npos;
  const std::string* found = nullptr;
  for (const auto& s : stops_) {
    size_t at = held_.find(s);
    if (at == std::string::npos) continue;
    if (at < best || (at == best && s.size() > found->size())) best = at, found = &s;
  }
  if (found) {
    stopped_ = true;
    step.stopped = true;
    step.stop = *found;
    step.text = held_.substr(0, best);
    held_.clear();
    return step;
  }
  // Hold the longest tail of the text that is the start of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > hold; --len)
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
  }
  step.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return step;
}

std::string StopMatcher::flush() {
  std::string out = std::move(held_);
  held_.clear();
  return stopped_ ? std::string() : out;
}

}  // namespace fs

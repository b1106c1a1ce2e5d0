#pragma once
// Finds stop strings in streamed text, even across pieces: text that could still become a stop string is held
// back until it cannot, and the text before a stop is reported.
#include <string>
#include <string_view>
#include <vector>

namespace fs {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);  // empty strings are ignored

  struct Step {
    std::string text;   // safe to emit now (after a stop: everything up to the stop)
    bool stopped = false;
    std::string stop;   // the stop string found
  };
  // Feeds the next piece of text; after a stop every later push returns an empty step.
  Step push(std::string_view piece);
  // Text still held back when the stream ends without a stop.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace fs

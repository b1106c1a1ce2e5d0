#pragma once
// What `foldserve pull` shows while it works: a redrawn bar on a terminal, plain lines otherwise.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace fs::hub {

class PullProgress {
 public:
  // `out` gets the display; `terminal` picks the bar over plain lines.
  PullProgress(std::FILE* out, bool terminal);

  void file_cached(const std::string& name, uint64_t size);
  // `have` bytes are already present (a resumed download).
  void file_started(const std::string& name, uint64_t size, uint64_t have);
  void file_advanced(uint64_t have);
  void file_finished();
  // Ends a bar left mid-line (before an error message).
  void interrupt();

 private:
  void draw(bool final);

  std::FILE* out_;
  bool terminal_;
  std::string name_;
  uint64_t size_ = 0, have_ = 0, start_have_ = 0;
  std::chrono::steady_clock::time_point started_, drawn_;
  bool mid_line_ = false;
};

// "19.7 MB", "3.2 GB": decimal units like the hub's web pages.
std::string format_bytes(uint64_t bytes);

}  // namespace fs::hub

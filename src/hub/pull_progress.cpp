#include "hub/pull_progress.h"

#include <algorithm>

namespace fs::hub {

using Clock = std::chrono::steady_clock;

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1000 && u < 4) v /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

PullProgress::PullProgress(std::FILE* out, bool terminal) : out_(out), terminal_(terminal) {}

void PullProgress::file_cached(const std::string& name, uint64_t size) {
  std::fprintf(out_, "%s  %s  already in the cache\n", name.c_str(), format_bytes(size).c_str());
  std::fflush(out_);
}

void PullProgress::file_started(const std::string& name, uint64_t size, uint64_t have) {
  name_ = name;
  size_ = size;
  have_ = start_have_ = have;
  started_ = Clock::now();
  drawn_ = {};
  if (!terminal_) {
    if (have > 0)
      std::fprintf(out_, "%s  resuming at %s of %s\n", name.c_str(), format_bytes(have).c_str(),
                   format_bytes(size).c_str());
    std::fflush(out_);
    return;
  }
  draw(false);
}

void PullProgress::file_advanced(uint64_t have) {
  have_ = have;
  if (terminal_ && Clock::now() - drawn_ >= std::chrono::milliseconds(100)) draw(false);
}

void PullProgress::file_finished() {
  if (terminal_) {
    draw(true);
    std::fputc('\n', out_);
    mid_line_ = false;
  } else {
    std::fprintf(out_, "%s  %s  downloaded\n", name_.c_str(), format_bytes(have_).c_str());
  }
  std::fflush(out_);
}

void PullProgress::interrupt() {
  if (mid_line_) std::fputc('\n', out_);
  mid_line_ = false;
  std::fflush(out_);
}

void PullProgress::draw(bool final) {
  drawn_ = Clock::now();
  const double seconds = std::chrono::duration<double>(drawn_ - started_).count();
  const double rate = seconds > 0.2 ? double(have_ - std::min(have_, start_have_)) / seconds : 0;
  const double frac = size_ ? std::min(1.0, double(have_) / double(size_)) : (final ? 1.0 : 0.0);
  constexpr int kWidth = 24;
  const int filled = int(frac * kWidth);
  std::string bar = std::string(size_t(filled), '#') + std::string(size_t(kWidth - filled), '.');
  std::string shown = name_.size() > 32 ? "…" + name_.substr(name_.size() - 31) : name_;
  std::fprintf(out_, "\r%-32s [%s] %3d%%  %s / %s  %s/s\033[K", shown.c_str(), bar.c_str(), int(frac * 100),
               format_bytes(have_).c_str(), format_bytes(size_).c_str(), format_bytes(uint64_t(rate)).c_str());
  mid_line_ = true;
  std::fflush(out_);
}

}  // namespace fs::hub

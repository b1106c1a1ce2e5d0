// A pass's deadline and asynchronous NCCL errors, watched from the thread that waits for the ranks.
#include "backends/cuda/host/pass_watchdog.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace fs::cuda {

namespace {

// "rank 1 of 2", "ranks 0, 1 of 2".
std::string ranks_text(const std::vector<int>& ranks, int of) {
  std::string list;
  for (int r : ranks) list += (list.empty() ? "" : ", ") + std::to_string(r);
  return (ranks.size() == 1 ? "rank " : "ranks ") + list + " of " + std::to_string(of);
}

}  // namespace

PassDeadline pass_deadline_from_env() {
  PassDeadline deadline;
  const char* text = std::getenv(kPassTimeoutVariable);
  if (!text || !*text) return deadline;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (*end != '\0' || !(seconds > 0) || seconds > 1e6)
    throw Error(std::string(kPassTimeoutVariable) + " must be a positive number of seconds, not '" + text + "'");
  deadline.timeout = std::max(std::chrono::milliseconds(1), std::chrono::milliseconds(int64_t(seconds * 1000)));
  return deadline;
}

std::string seconds_text(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", double(duration.count()) / 1000);
  return text;
}

PassWatchdog::PassWatchdog(TensorParallelGroup& group, const PassDeadline& deadline)
    : group_(group), deadline_(deadline), start_(std::chrono::steady_clock::now()) {}

std::chrono::milliseconds PassWatchdog::period() const {
  return std::max(std::chrono::milliseconds(1), std::min(deadline_.timeout, deadline_.poll));
}

void PassWatchdog::watch(const std::vector<int>& unfinished) {
  if (!fired_.empty() || unfinished.empty()) return;
  try {
    if (std::chrono::steady_clock::now() - start_ >= deadline_.timeout) {
      fire("did not finish within " + seconds_text(deadline_.timeout) + " (" + kPassTimeoutVariable + ")",
           unfinished);
      return;
    }
    const std::string error = group_.async_error();
    if (!error.empty()) fire("was stopped by an NCCL error: " + error, unfinished);
  } catch (const std::exception& e) {
    fire(std::string("was stopped: its watchdog failed: ") + e.what(), unfinished);
  }
}

void PassWatchdog::fire(const std::string& why, const std::vector<int>& unfinished) {
  fired_ = "the tensor-parallel pass " + why + "; " + ranks_text(unfinished, group_.ranks()) +
           " had not returned, so the communicators were aborted";
  group_.abort(fired_);
}

}  // namespace fs::cuda

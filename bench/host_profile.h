#pragma once
// A sampling profiler of the host threads for benchmark programs: SIGPROF at a fixed rate of CPU time, each sample
// the interrupted thread's id and return addresses, written as module+offset lines for addr2line.
#include <string>

namespace fs {

class HostProfile {
 public:
  // Starts sampling every 1/hz seconds of the process's CPU time; one profile at a time.
  explicit HostProfile(int hz);
  ~HostProfile();
  HostProfile(const HostProfile&) = delete;
  HostProfile& operator=(const HostProfile&) = delete;

  // Stops sampling and writes one line a sample: "TID MODULE+0xOFFSET ..." (innermost first); prints how many
  // samples the process's CPU seconds and the wall seconds since the start gave (the timer ticks with the kernel's).
  void write(const std::string& path);

 private:
  double cpu_at_start_, wall_at_start_;
};

}  // namespace fs

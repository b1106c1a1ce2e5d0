#include "host_profile.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace fs {

namespace {

constexpr int kDepth = 24;
constexpr size_t kMaxSamples = 1 << 16;

struct Sample {
  long tid;
  int depth;
  void* frames[kDepth];
};

std::vector<Sample>* samples = nullptr;  // preallocated: the handler only writes into it
std::atomic<size_t> taken{0};

void on_sigprof(int) {
  const size_t i = taken.fetch_add(1, std::memory_order_relaxed);
  if (!samples || i >= samples->size()) return;
  Sample& s = (*samples)[i];
  s.tid = long(syscall(SYS_gettid));
  s.depth = backtrace(s.frames, kDepth);
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double wall_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

void set_timer(int hz) {
  itimerval t{};
  t.it_interval.tv_usec = hz > 0 ? 1000000 / hz : 0;
  t.it_value = t.it_interval;
  if (setitimer(ITIMER_PROF, &t, nullptr) != 0) throw Error("setitimer(ITIMER_PROF) failed");
}

}  // namespace

HostProfile::HostProfile(int hz) {
  if (samples) throw Error("a host profile is already running");
  void* warm[2];
  backtrace(warm, 2);  // loads the unwinder now, not inside the handler
  samples = new std::vector<Sample>(kMaxSamples);
  taken = 0;
  struct sigaction sa{};
  sa.sa_handler = on_sigprof;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, nullptr);
  cpu_at_start_ = cpu_seconds();
  wall_at_start_ = wall_seconds();
  set_timer(hz);
}

HostProfile::~HostProfile() {
  set_timer(0);
  signal(SIGPROF, SIG_IGN);
  delete samples;
  samples = nullptr;
}

void HostProfile::write(const std::string& path) {
  set_timer(0);
  std::printf("host profile: %zu samples over %.3f s of process CPU time and %.3f s of wall time -> %s\n",
              std::min(taken.load(), samples->size()), cpu_seconds() - cpu_at_start_, wall_seconds() - wall_at_start_,
              path.c_str());
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw Error("cannot write the host profile to " + path);
  const size_t n = std::min(taken.load(), samples->size());
  for (size_t i = 0; i < n; ++i) {
    const Sample& s = (*samples)[i];
    std::fprintf(f, "%ld", s.tid);
    for (int d = 0; d < s.depth; ++d) {
      Dl_info info{};
      if (dladdr(s.frames[d], &info) && info.dli_fname) {
        const char* slash = std::strrchr(info.dli_fname, '/');
        std::fprintf(f, " %s+0x%zx", slash ? slash + 1 : info.dli_fname,
                     size_t(static_cast<char*>(s.frames[d]) - static_cast<char*>(info.dli_fbase)));
      } else {
        std::fprintf(f, " ?+%p", s.frames[d]);
      }
    }
    std::fputc('\n', f);
  }
  std::fclose(f);
}

}  // namespace fs

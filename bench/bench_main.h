#pragma once
// The main() of a benchmark program: runs `bench`, and reports an exception as "NAME: what" with exit status 1.
#include <cstdio>
#include <exception>

namespace fs {

inline int run_bench(const char* name, int (*bench)(int, char**), int argc, char** argv) {
  try {
    return bench(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

// The main() of a GPU benchmark in a build without the CUDA backend: says so, exit status 1.
inline int no_cuda_backend(const char* name) {
  std::fprintf(stderr, "%s: this build has no CUDA backend\n", name);
  return 1;
}

}  // namespace fs

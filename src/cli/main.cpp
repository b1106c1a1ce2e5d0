// foldserve: dispatches to the registered subcommands.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/host/nccl_table.h"
#include "cli/command.h"
#include "core/error.h"

#ifndef FOLDSERVE_BACKENDS
#define FOLDSERVE_BACKENDS "cpu"
#endif

namespace fs::cli {

std::map<std::string, Command>& commands() {
  static std::map<std::string, Command> table;
  return table;
}

static void print_usage() {
  std::printf("usage: foldserve COMMAND [options]\n\ncommands:\n");
  for (const auto& [name, cmd] : commands()) std::printf("  %-16s %s\n", name.c_str(), cmd.summary.c_str());
  std::printf("\nfoldserve --version prints the version, the compiled-in backends and the NCCL found.\n");
}

}  // namespace fs::cli

int main(int argc, char** argv) {
  using namespace fs::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("foldserve %s\nbackends: %s\nnccl: %s\n", FOLDSERVE_VERSION, FOLDSERVE_BACKENDS,
                fs::cuda::nccl_description().c_str());
    return 0;
  }
  auto it = commands().find(argv[1]);
  if (it == commands().end()) {
    std::fprintf(stderr, "foldserve: unknown command '%s' (see foldserve --help)\n", argv[1]);
    return 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    return it->second.run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "foldserve %s: %s\n", argv[1], e.what());
    return 1;
  }
}

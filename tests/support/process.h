#pragma once
// Runs a shell command for tests and captures its exit code, stdout and stderr.
#include <string>

namespace fs::test {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CommandResult run_command(const std::string& command);
// A TCP port on 127.0.0.1 that was free a moment ago.
int free_loopback_port();
// Quotes a string for /bin/sh.
std::string shell_quote(const std::string& s);

}  // namespace fs::test

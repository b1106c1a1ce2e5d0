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
// Quotes a string for /bin/sh.
std::string shell_quote(const std::string& s);

}  // namespace fs::test

#pragma once
// Subcommands register themselves here; main() dispatches on the first argument.
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace fs::cli {

using CommandFn = std::function<int(const std::vector<std::string>& args)>;

struct Command {
  std::string summary;
  CommandFn run;
};

std::map<std::string, Command>& commands();

struct Registrar {
  Registrar(const std::string& name, const std::string& summary, CommandFn fn) {
    commands()[name] = Command{summary, std::move(fn)};
  }
};

}  // namespace fs::cli

#define FS_CONCAT_INNER(a, b) a##b
#define FS_CONCAT(a, b) FS_CONCAT_INNER(a, b)
// Registers `fn` as `foldserve NAME`.
#define FS_REGISTER_COMMAND(name, summary, fn) \
  static ::fs::cli::Registrar FS_CONCAT(fs_command_, __LINE__)(name, summary, fn)

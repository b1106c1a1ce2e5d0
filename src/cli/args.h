#pragma once
// A small command-line parser: --flag, --flag VALUE, --flag=VALUE, repeated flags, and positionals.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace fs::cli {

class Args {
 public:
  // `valued` names the flags that take a value, `switches` those that do not; anything else is an error.
  Args(const std::vector<std::string>& argv, const std::set<std::string>& valued,
       const std::set<std::string>& switches);

  bool has(const std::string& flag) const;
  std::optional<std::string> get(const std::string& flag) const;  // last occurrence
  std::vector<std::string> all(const std::string& flag) const;    // every occurrence
  std::string get_or(const std::string& flag, const std::string& fallback) const;
  long long get_int(const std::string& flag, long long fallback) const;
  double get_double(const std::string& flag, double fallback) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positionals_;
};

// Parses "1,2,3" into ids; throws fs::Error on a bad element.
std::vector<int32_t> parse_id_list(const std::string& text);

}  // namespace fs::cli

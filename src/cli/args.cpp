#include "cli/args.h"

#include <cstdint>
#include <cstdlib>

#include "core/error.h"

namespace fs::cli {

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& valued,
           const std::set<std::string>& switches) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      std::string name = a.substr(2), value;
      bool inline_value = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        inline_value = true;
      }
      if (valued.count(name)) {
        if (!inline_value) {
          if (i + 1 >= argv.size()) throw Error("--" + name + " needs a value");
          value = argv[++i];
        }
        values_[name].push_back(value);
      } else if (switches.count(name) && !inline_value) {
        values_[name].push_back("");
      } else {
        throw Error("unknown option --" + name);
      }
    } else {
      positionals_.push_back(a);
    }
  }
}

bool Args::has(const std::string& flag) const { return values_.count(flag) > 0; }

std::optional<std::string> Args::get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::all(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::string Args::get_or(const std::string& flag, const std::string& fallback) const {
  auto v = get(flag);
  return v ? *v : fallback;
}

long long Args::get_int(const std::string& flag, long long fallback) const {
  auto v = get(flag);
  if (!v) return fallback;
  char* end = nullptr;
  long long n = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end) throw Error("--" + flag + " expects an integer, got '" + *v + "'");
  return n;
}

double Args::get_double(const std::string& flag, double fallback) const {
  auto v = get(flag);
  if (!v) return fallback;
  char* end = nullptr;
  double d = std::strtod(v->c_str(), &end);
  if (v->empty() || *end) throw Error("--" + flag + " expects a number, got '" + *v + "'");
  return d;
}

std::vector<int32_t> parse_id_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    std::string part = text.substr(i, j - i);
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end || v < 0 || v > INT32_MAX) throw Error("bad token id '" + part + "' in --ids");
    ids.push_back(int32_t(v));
    i = j + 1;
  }
  return ids;
}

}  // namespace fs::cli

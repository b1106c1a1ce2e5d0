#include "server/auth.h"

#include <sys/stat.h>

#include <cctype>

#include "core/error.h"
#include "core/files.h"

namespace fs::server {

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = diff | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]));
  return diff == 0;
}

ApiKeys::ApiKeys(std::vector<std::string> keys) : keys_(std::move(keys)) {}

bool ApiKeys::matches(std::string_view key) const {
  bool found = false;
  for (const auto& k : keys_) found = constant_time_equal(key, k) || found;  // every key is compared
  return found;
}

bool ApiKeys::allows(std::string_view authorization, std::string_view x_api_key) const {
  if (keys_.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() > kBearer.size()) {
    std::string_view scheme = authorization.substr(0, kBearer.size());
    bool bearer = true;
    for (size_t i = 0; i < kBearer.size(); ++i)
      bearer = bearer && std::tolower(static_cast<unsigned char>(scheme[i])) ==
                             std::tolower(static_cast<unsigned char>(kBearer[i]));
    if (bearer && matches(authorization.substr(kBearer.size()))) return true;
  }
  return !x_api_key.empty() && matches(x_api_key);
}

std::vector<std::string> load_api_key_file(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error("cannot read the API key file " + path.string());
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    throw Error("the API key file " + path.string() +
                " can be read by group or others; run: chmod 600 " + path.string());
  }
  std::string text = read_file(path);
  std::vector<std::string> keys;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find('\n', i);
    if (j == std::string::npos) j = text.size();
    std::string line = text.substr(i, j - i);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start != std::string::npos && line[start] != '#') keys.push_back(line.substr(start));
    i = j + 1;
  }
  if (keys.empty()) throw Error("the API key file " + path.string() + " holds no key");
  return keys;
}

}  // namespace fs::server

#pragma once
// API keys: which requests carry a valid one (Authorization: Bearer KEY or x-api-key: KEY), compared in constant
// time, and loading keys from a file that only its owner may read.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace fs::server {

// Equal strings, in time that depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

class ApiKeys {
 public:
  ApiKeys() = default;
  explicit ApiKeys(std::vector<std::string> keys);
  bool enabled() const { return !keys_.empty(); }
  // authorization: the Authorization header ("" when absent); x_api_key likewise.
  bool allows(std::string_view authorization, std::string_view x_api_key) const;

 private:
  bool matches(std::string_view key) const;
  std::vector<std::string> keys_;
};

// One key per line (blank lines and # comments skipped). Refuses a file that group or others can read, or that
// holds no key, with fs::Error.
std::vector<std::string> load_api_key_file(const std::filesystem::path& path);

}  // namespace fs::server

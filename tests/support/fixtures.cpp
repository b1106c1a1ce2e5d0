#include "support/fixtures.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/files.h"

namespace fs::test {

std::filesystem::path shared_dir() {
  std::filesystem::path p;
  const char* env = std::getenv("FOLDSERVE_SHARED");
  p = (env && *env) ? std::filesystem::path(env) : std::filesystem::path(FOLDSERVE_DEFAULT_SHARED);
  std::error_code ec;
  if (!std::filesystem::exists(p / "models", ec)) return {};
  return p;
}

bool running_in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::strcmp(ci, "true") == 0;
}

std::vector<float> read_f32(const std::filesystem::path& path) {
  std::string bytes = read_file(path);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  if (a.size() != b.size()) return INFINITY;
  return std::sqrt(num / (den > 0 ? den : 1));
}

std::string foldserve_binary() { return FOLDSERVE_BINARY; }

}  // namespace fs::test

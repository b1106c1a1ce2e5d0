#include "core/files.h"

#include <fstream>
#include <sstream>
#include <unistd.h>

#include "core/error.h"

namespace fs {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error("cannot read " + path.string());
  return ss.str();
}

json read_json_file(const std::filesystem::path& path) {
  std::string text = read_file(path);
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) throw Error(path.string() + ": malformed JSON");
  return j;
}

static std::filesystem::path executable_dir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  buf[n] = 0;
  return std::filesystem::path(buf).parent_path();
}

std::filesystem::path builtin_model_dir() {
  namespace stdfs = std::filesystem;
  std::vector<stdfs::path> candidates;
  if (const char* env = std::getenv("FOLDSERVE_MODELS")) candidates.push_back(stdfs::path(env) / "fortune-demo");
  stdfs::path exe = executable_dir();
  if (!exe.empty()) candidates.push_back(exe.parent_path() / "share/foldserve/models/fortune-demo");
  candidates.push_back(stdfs::path(FOLDSERVE_INSTALL_DATADIR) / "foldserve/models/fortune-demo");
  candidates.push_back(stdfs::path(FOLDSERVE_SOURCE_DIR) / "models/fortune-demo");
  for (const auto& c : candidates) {
    std::error_code ec;
    if (stdfs::exists(c / "config.json", ec)) return c;
  }
  throw Error("the built-in model fortune-demo was not found (set FOLDSERVE_MODELS to its parent folder)");
}

}  // namespace fs

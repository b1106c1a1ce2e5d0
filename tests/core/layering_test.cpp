// The libraries under src/ form layers; a file may include headers of its own layer or lower ones only, so nothing
// reaches upward (core/io < text, cuda host < models, cpu backend < cuda kernels < engine < vision, hub < server < cli).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>

namespace fs {
namespace {

namespace stdfs = std::filesystem;

std::optional<int> layer_of(const std::string& path) {
  static const std::pair<const char*, int> layers[] = {
      {"core/", 0},   {"io/", 0},     {"backends/cuda/host/", 1},   {"text/", 1},   {"backends/cpu/", 2},
      {"models/", 2}, {"backends/cuda/kernels/", 3}, {"engine/", 4}, {"vision/", 5}, {"hub/", 5},
      {"server/", 6}, {"cli/", 7}};
  for (const auto& [prefix, layer] : layers)
    if (path.rfind(prefix, 0) == 0) return layer;
  return std::nullopt;
}

TEST(Layering, NoFileIncludesAHigherLayer) {
  const stdfs::path src = stdfs::path(FOLDSERVE_SOURCE_DIR) / "src";
  const std::regex include(R"re(^\s*#\s*include\s+"([^"]+)")re");
  std::vector<std::string> upward;
  size_t files = 0;
  for (const auto& entry : stdfs::recursive_directory_iterator(src)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh")) continue;
    const std::string path = stdfs::relative(entry.path(), src).generic_string();
    const auto own = layer_of(path);
    if (!own) continue;
    ++files;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      const auto target = layer_of(m[1].str());
      const std::string edge = path + " -> " + m[1].str();
      if (target && *target > *own) upward.push_back(edge);
    }
  }
  EXPECT_GT(files, 100u);
  EXPECT_TRUE(upward.empty()) << [&] {
    std::string all;
    for (const auto& e : upward) all += "\n  " + e;
    return "upward includes:" + all;
  }();
}

}  // namespace
}  // namespace fs

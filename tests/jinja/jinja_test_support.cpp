#include "jinja/jinja_test_support.h"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include <unistd.h>

#include "core/error.h"
#include "core/files.h"

namespace fs::test {

std::vector<RealTemplate> real_templates(const std::filesystem::path& shared) {
  return {{"qwen3", shared / "models/tiny-qwen3"},
          {"llama3", shared / "models/tiny-llama3"},
          {"gemma3", shared / "tokenizers/gemma3"},
          {"fortune-demo", shared / "models/fortune-demo"},
          {"qwen2.5-vl", shared / "models/tiny-qwen2.5-vl"}};
}

ojson read_ordered_json(const std::filesystem::path& path) { return ojson::parse(read_file(path)); }

bool python_jinja_available() {
  return std::system("/usr/bin/python3 -c 'import jinja2' >/dev/null 2>&1") == 0;
}

ojson python_render(const std::string& source, const ojson& contexts) {
  static std::atomic<int> counter{0};
  auto dir = std::filesystem::temp_directory_path() /
             ("foldserve-jinja-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "template.jinja", std::ios::binary) << source;
    std::ofstream(dir / "contexts.json", std::ios::binary) << contexts.dump();
  }
  std::string script = std::string(FOLDSERVE_SOURCE_DIR) + "/scripts/jinja_reference.py";
  std::string cmd = "/usr/bin/python3 '" + script + "' '" + (dir / "template.jinja").string() + "' '" +
                    (dir / "contexts.json").string() + "' > '" + (dir / "out.json").string() + "' 2> '" +
                    (dir / "err.txt").string() + "'";
  int rc = std::system(cmd.c_str());
  std::string out = read_file(dir / "out.json"), err = read_file(dir / "err.txt");
  std::filesystem::remove_all(dir);
  if (rc != 0) throw Error("jinja_reference.py failed: " + err);
  return ojson::parse(out);
}

}  // namespace fs::test

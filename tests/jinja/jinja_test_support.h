#pragma once
// Shared pieces of the template tests: where the real templates live, and running the Python reference.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fs::test {

using ojson = nlohmann::ordered_json;

// The five real templates the tests render: a name and the folder ChatTemplate::load reads.
struct RealTemplate {
  std::string name;
  std::filesystem::path dir;
};
std::vector<RealTemplate> real_templates(const std::filesystem::path& shared);

// Reads a JSON file keeping key order.
ojson read_ordered_json(const std::filesystem::path& path);

// True when /usr/bin/python3 can import jinja2.
bool python_jinja_available();

// Renders `source` with scripts/jinja_reference.py over `contexts` (a list of {"vars": {...}});
// returns one {"text"} or {"error"} object per context.
ojson python_render(const std::string& source, const ojson& contexts);

}  // namespace fs::test

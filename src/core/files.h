#pragma once
// Small file helpers: whole-file reads, JSON files, and where the built-in model lives.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace fs {

using json = nlohmann::json;

// Reads a whole file; throws fs::Error naming the path on failure.
std::string read_file(const std::filesystem::path& path);
// Parses a JSON file; throws fs::Error naming the path and the parser's message.
json read_json_file(const std::filesystem::path& path);
// The built-in fortune-demo folder: $FOLDSERVE_MODELS/fortune-demo, then beside the installed binary, then the
// source tree.
std::filesystem::path builtin_model_dir();

}  // namespace fs

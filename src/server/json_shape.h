#pragma once
// Bounds a JSON text's nesting depth and value count before any tree is built, so a hostile body cannot exhaust
// the stack or memory of the parser and of the code that walks the tree.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace fs::server {

struct JsonShapeLimits {
  size_t max_depth = 128;         // nested arrays and objects
  size_t max_values = 1u << 20;   // scalars, arrays and objects together
};

// nullopt when `text` stays within the limits (it may still be invalid JSON), else why not.
std::optional<std::string> json_shape_violation(std::string_view text, const JsonShapeLimits& limits = {});

}  // namespace fs::server

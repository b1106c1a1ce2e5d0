#include "server/json_shape.h"

namespace fs::server {

std::optional<std::string> json_shape_violation(std::string_view text, const JsonShapeLimits& limits) {
  size_t depth = 0, values = 0;
  bool in_string = false, escaped = false, in_scalar = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    const bool scalar_char = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                             c == '-' || c == '+' || c == '.';
    if (scalar_char) {
      if (!in_scalar) ++values;
      in_scalar = true;
    } else {
      in_scalar = false;
    }
    if (c == '"') {
      in_string = true;
      ++values;
    } else if (c == '[' || c == '{') {
      ++values;
      if (++depth > limits.max_depth)
        return "the JSON body nests deeper than " + std::to_string(limits.max_depth) + " levels";
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    }
    if (values > limits.max_values)
      return "the JSON body holds more than " + std::to_string(limits.max_values) + " values";
  }
  return std::nullopt;
}

}  // namespace fs::server

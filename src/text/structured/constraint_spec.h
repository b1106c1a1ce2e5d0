#pragma once
// What a request constrains its reply to, and the grammar for it.
#include <string>

#include "text/structured/grammar.h"

namespace fs::structured {

struct ConstraintSpec {
  enum class Kind { JsonSchema, JsonObject, Regex, ToolCall };
  Kind kind = Kind::JsonObject;
  // JsonSchema: the schema's JSON text; Regex: the pattern; ToolCall: a JSON list of {"name", "parameters"} (one
  // of them is called); JsonObject: unused.
  std::string text;
  // The bytes the compiled form is cached by.
  std::string key() const { return std::to_string(int(kind)) + '\n' + text; }
};

// The grammar of a whole reply: the JSON value (whitespace around it allowed), the regex's full match, or one
// Qwen-style tool call "<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>". Throws fs::Error with the
// reason for a schema or pattern that is refused.
Grammar grammar_for(const ConstraintSpec& spec);

}  // namespace fs::structured

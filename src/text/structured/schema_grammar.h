#pragma once
// JSON Schema compiled into grammar rules that produce exactly JSON texts the schema accepts (a subset of them
// where noted in docs/structured-output.md: properties in schema order, bounded integers within 16 digits).
// Unsupported keywords, invalid schemas and schemas nested too deep are refused with fs::Error naming the reason.
#include <nlohmann/json.hpp>

#include "text/structured/grammar.h"

namespace fs::structured {

struct SchemaLimits {
  int max_depth = 32;       // nesting of subschemas (a $ref counts as one level each time it is compiled)
  size_t max_rules = 20000; // grammar rules
};

// A sequence producing one JSON value valid against `schema` (a JSON Schema; an empty object means any value).
Seq compile_schema(GrammarBuilder& b, const nlohmann::ordered_json& schema, const SchemaLimits& limits = {});

// Optional JSON whitespace between tokens: one space, or a newline and up to 16 spaces or tabs of indentation.
Sym json_space(GrammarBuilder& b);

}  // namespace fs::structured

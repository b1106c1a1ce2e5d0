#include "text/structured/constraint_spec.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/structured/regex_grammar.h"
#include "text/structured/schema_grammar.h"

namespace fs::structured {

namespace {

using json = nlohmann::ordered_json;

constexpr size_t kMaxSpecBytes = 64 * 1024;

json parse_schema(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const std::exception& e) {
    throw Error(std::string("the schema is not valid JSON: ") + e.what());
  }
}

}  // namespace

Grammar grammar_for(const ConstraintSpec& spec) {
  if (spec.text.size() > kMaxSpecBytes)
    throw Error("the constraint is too large (" + std::to_string(spec.text.size()) + " bytes; at most " +
                std::to_string(kMaxSpecBytes) + ")");
  GrammarBuilder b;
  const uint32_t root = b.new_rule();
  Seq body;
  switch (spec.kind) {
    case ConstraintSpec::Kind::Regex:
      body = compile_regex(b, spec.text, {});
      break;
    case ConstraintSpec::Kind::JsonObject:
      body = {json_space(b)};
      append(body, compile_schema(b, json{{"type", "object"}}));
      body.push_back(json_space(b));
      break;
    case ConstraintSpec::Kind::JsonSchema:
      body = {json_space(b)};
      append(body, compile_schema(b, parse_schema(spec.text)));
      body.push_back(json_space(b));
      break;
    case ConstraintSpec::Kind::ToolCall: {
      const json tools = parse_schema(spec.text);
      if (!tools.is_array() || tools.empty()) throw Error("a forced tool call needs at least one tool");
      std::vector<Seq> calls;
      for (const auto& t : tools) {
        if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
          throw Error("every tool of a forced tool call needs a string 'name'");
        Seq call = b.literal("<tool_call>\n{\"name\": " + json(t["name"].get<std::string>()).dump() +
                             ", \"arguments\": ");
        const json params = t.contains("parameters") && !t["parameters"].is_null() ? t["parameters"] : json::object();
        append(call, compile_schema(b, params));
        append(call, b.literal("}\n</tool_call>"));
        calls.push_back(std::move(call));
      }
      body = {b.any_of(std::move(calls))};
      break;
    }
  }
  b.add_alt(root, std::move(body));
  return b.build(root);
}

}  // namespace fs::structured

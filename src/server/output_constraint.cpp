#include "server/output_constraint.h"

#include <map>
#include <mutex>

#include "core/error.h"
#include "server/api_error.h"
#include "text/structured/constraint_cache.h"
#include "text/tokenizer.h"

namespace fs::server {

namespace {

using json = nlohmann::ordered_json;
using structured::ConstraintSpec;

[[noreturn]] void fail(const std::string& param, const std::string& message) {
  throw ApiException{bad_request(param, message)};
}

const json* member(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// The cache of one tokenizer; a server loads one model, so one entry lives for the process.
structured::ConstraintCache& cache_for(const Tokenizer& tokenizer) {
  static std::mutex mu;
  static std::map<const Tokenizer*, std::unique_ptr<structured::ConstraintCache>> caches;
  std::lock_guard lock(mu);
  auto& c = caches[&tokenizer];
  if (!c) c = std::make_unique<structured::ConstraintCache>(std::make_shared<structured::TokenVocab>(tokenizer));
  return *c;
}

}  // namespace

std::optional<RequestedConstraint> response_constraint(const json& body) {
  std::optional<RequestedConstraint> out;
  if (const json* rf = member(body, "response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
      fail("response_format", "'response_format' must be an object with a 'type'");
    const std::string type = (*rf)["type"].get<std::string>();
    if (type == "json_object") {
      out = RequestedConstraint{{ConstraintSpec::Kind::JsonObject, ""}, "response_format"};
    } else if (type == "json_schema") {
      const json* js = member(*rf, "json_schema");
      if (!js || !js->is_object())
        fail("response_format.json_schema", "'response_format.json_schema' must be an object with a 'schema'");
      if (const json* name = member(*js, "name"); name && !name->is_string())
        fail("response_format.json_schema.name", "'response_format.json_schema.name' must be a string");
      if (const json* strict = member(*js, "strict"); strict && !strict->is_boolean())
        fail("response_format.json_schema.strict", "'response_format.json_schema.strict' must be a boolean");
      const json* schema = member(*js, "schema");
      if (!schema || !(schema->is_object() || schema->is_boolean()))
        fail("response_format.json_schema.schema", "'response_format.json_schema.schema' must be a JSON Schema object");
      out = RequestedConstraint{{ConstraintSpec::Kind::JsonSchema, schema->dump()}, "response_format.json_schema.schema"};
    } else if (type != "text") {
      fail("response_format.type", "'response_format.type' must be text, json_object or json_schema");
    }
  }
  if (const json* rx = member(body, "regex")) {
    if (!rx->is_string() || rx->get<std::string>().empty()) fail("regex", "'regex' must be a non-empty string");
    if (out) fail("regex", "'regex' and a JSON 'response_format' cannot be combined");
    out = RequestedConstraint{{ConstraintSpec::Kind::Regex, rx->get<std::string>()}, "regex"};
  }
  return out;
}

std::optional<RequestedConstraint> tool_constraint(const json& body, const json& tools) {
  const json* tc = member(body, "tool_choice");
  if (!tc || (tc->is_string() && tc->get<std::string>() != "required")) return std::nullopt;
  if (tools.is_null() || tools.empty()) fail("tool_choice", "'tool_choice' forces a tool call but 'tools' is empty");
  std::string forced;
  if (tc->is_object()) forced = (*tc)["function"]["name"].get<std::string>();
  nlohmann::json allowed = nlohmann::json::array();
  for (const auto& t : tools) {
    const json& f = t["function"];
    if (!forced.empty() && f["name"] != forced) continue;
    nlohmann::json one = {{"name", f["name"]}};
    if (f.contains("parameters")) one["parameters"] = nlohmann::json::parse(f["parameters"].dump());
    allowed.push_back(std::move(one));
  }
  if (allowed.empty()) fail("tool_choice", "'tool_choice' names '" + forced + "', which is not among 'tools'");
  return RequestedConstraint{{ConstraintSpec::Kind::ToolCall, allowed.dump()}, "tool_choice"};
}

std::shared_ptr<structured::CompiledConstraint> compile_constraint(const Tokenizer& tokenizer,
                                                                   const RequestedConstraint& c) {
  try {
    return cache_for(tokenizer).get(c.spec);
  } catch (const Error& e) {
    fail(c.param, e.what());
  }
}

}  // namespace fs::server

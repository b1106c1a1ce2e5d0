#pragma once
// The output constraints of a request (response_format json_schema / json_object, the "regex" extension, a forced
// tool call) read from its body, and compiled against the served tokenizer through one cache per tokenizer.
// Every refusal is an ApiException (400) naming the field and the reason.
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "text/structured/constraint_spec.h"

namespace fs {
class Tokenizer;
namespace structured {
class CompiledConstraint;
}
}  // namespace fs

namespace fs::server {

struct RequestedConstraint {
  structured::ConstraintSpec spec;
  std::string param;  // the request field it came from
};

// response_format (text → none) and "regex" of a chat or completion body.
std::optional<RequestedConstraint> response_constraint(const nlohmann::ordered_json& body);

// tool_choice "required" (any of `tools`) or {"type": "function", "function": {"name"}} (that tool); `tools` is
// the validated list (null when none are offered).
std::optional<RequestedConstraint> tool_constraint(const nlohmann::ordered_json& body,
                                                   const nlohmann::ordered_json& tools);

// The compiled form, shared by every request with the same spec.
std::shared_ptr<structured::CompiledConstraint> compile_constraint(const Tokenizer& tokenizer,
                                                                   const RequestedConstraint& c);

}  // namespace fs::server

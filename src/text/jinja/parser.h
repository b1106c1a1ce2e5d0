#pragma once
// Builds the statement tree from tokens, following Jinja2's grammar and operator precedence.
#include <string_view>

#include "text/jinja/ast.h"

namespace fs::jinja {

// Throws TemplateError "template syntax error at line N: ..." on bad syntax.
Body parse_template(std::string_view source);

}  // namespace fs::jinja

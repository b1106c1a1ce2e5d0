#include "text/jinja/template.h"

#include "text/jinja/error.h"
#include "text/jinja/parser.h"
#include "text/jinja/runtime.h"

namespace fs::jinja {

Template::Template(std::string_view source, Limits limits)
    : body_(std::make_shared<const Body>(parse_template(source))), limits_(limits) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const std::vector<std::pair<std::string, Value>>& vars) const {
  auto globals = std::make_shared<Frame>();
  add_builtins(*globals);
  for (const auto& [name, value] : vars) globals->vars[name] = value;
  Runtime rt(limits_, globals);
  return rt.render(*body_);
}

}  // namespace fs::jinja

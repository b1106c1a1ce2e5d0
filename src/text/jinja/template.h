#pragma once
// A parsed Jinja template, rendered over a set of variables as Jinja2 (trim_blocks, lstrip_blocks) would.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/limits.h"
#include "text/jinja/value.h"

namespace fs::jinja {

struct Stmt;

class Template {
 public:
  // Parses `source`; throws TemplateError with the line of a syntax error.
  explicit Template(std::string_view source, Limits limits = {});
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with these variables on top of the built-in functions; throws TemplateError.
  std::string render(const std::vector<std::pair<std::string, Value>>& vars) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
  Limits limits_;
};

}  // namespace fs::jinja

#pragma once
// The one error a template raises: a syntax error (with its line), a runtime error, raise_exception's
// message, or a limit that stopped a hostile template.
#include "core/error.h"

namespace fs {

struct TemplateError : Error {
  using Error::Error;
};

}  // namespace fs

namespace fs::jinja {

// raise_exception(message) from inside a template: its message is passed on unchanged.
struct RaisedError : TemplateError {
  using TemplateError::TemplateError;
};

}  // namespace fs::jinja

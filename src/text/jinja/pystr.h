#pragma once
// Python's text conventions for the template engine: UTF-8 code points, float repr, string repr, JSON escapes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fs::jinja {

// UTF-8 ↔ code points; an invalid byte decodes to itself (U+0080..U+00FF) so nothing is lost.
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t cp);
size_t utf8_length(std::string_view s);

// str.isspace() for one code point.
bool py_isspace(char32_t c);
bool py_isalnum(char32_t c);
bool py_isalpha(char32_t c);
bool py_isdigit(char32_t c);
char32_t py_upper(char32_t c);
// str.upper() of a whole string, with Python's one-to-many mappings (ß → SS).
std::string py_upper_string(std::string_view s);
char32_t py_lower(char32_t c);
bool py_islower(char32_t c);
bool py_isupper(char32_t c);

// repr(float): shortest round-trip digits, "1e-05", "1e+16", "2.0", "inf", "nan".
std::string py_float_repr(double v);
// repr(str): quotes chosen as Python does, escapes for non-printables.
std::string py_string_repr(std::string_view s);
// json.dumps(str, ensure_ascii=...) including the quotes.
std::string json_string(std::string_view s, bool ensure_ascii);

// str.strip / lstrip / rstrip: whitespace when `chars` is null.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.splitlines() (no keepends).
std::vector<std::string> py_splitlines(std::string_view s);

}  // namespace fs::jinja

#pragma once
// The template engine's values: Python's None/bool/int/float/str/list/tuple/dict plus Jinja's undefined,
// namespace, loop and callables. Lists and dicts are shared by reference, as in Python.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace fs::jinja {

class Runtime;
struct Value;

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The keyword argument `name`, or null.
  const Value* kwarg(std::string_view name) const;
};

using NativeFn = std::function<Value(Runtime&, CallArgs&)>;

struct Function {
  std::string name;
  NativeFn fn;
};

// Containers deeper than this are refused, so printing and freeing them cannot exhaust the stack.
constexpr uint32_t kMaxNesting = 256;

struct ListData {
  std::vector<Value> items;
  bool tuple = false;
  uint32_t depth = 1;
  // Appends, keeping `depth` current; throws past kMaxNesting.
  void append(Value v);
};

// An insertion-ordered dict; keys compare as Python does (1 == 1.0 == True).
struct DictData {
  std::vector<std::pair<Value, Value>> items;
  uint32_t depth = 1;
  Value* find(const Value& key);
  Value* find(std::string_view key);
  void set(const Value& key, Value value);
};

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Loop, Function };

struct Value {
  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // the text of a String; for Undefined, what was missing (for error messages)
  std::shared_ptr<ListData> list;  // List; for Loop, the items looped over (and `i` the position)
  std::shared_ptr<DictData> dict;  // Dict and Namespace
  std::shared_ptr<Function> fn;

  static Value undefined(std::string hint = "");
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value new_list(std::vector<Value> items = {}, bool tuple = false);
  static Value new_dict();
  static Value function(std::string name, NativeFn fn);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  bool is_numeric() const { return kind == Kind::Bool || kind == Kind::Int || kind == Kind::Float; }
  bool is_integral() const { return kind == Kind::Bool || kind == Kind::Int; }
  double as_double() const { return kind == Kind::Float ? f : kind == Kind::Bool ? double(b) : double(i); }
  int64_t as_int() const { return kind == Kind::Bool ? int64_t(b) : i; }
};

// How deeply `v` nests containers (0 for scalars).
uint32_t nesting_of(const Value& v);

// Python truthiness (undefined is falsy).
bool truthy(const Value& v);
// str(v) as Jinja prints it (undefined → "").
std::string to_str(const Value& v);
// repr(v).
std::string to_repr(const Value& v);
// Python ==.
bool equals(const Value& a, const Value& b);
// Python <; throws TemplateError-style fs::Error for incomparable types.
bool less_than(const Value& a, const Value& b);
// The Python type name used in error messages ("str", "NoneType", ...).
std::string type_name(const Value& v);

Value from_json(const nlohmann::ordered_json& j);
// json.dumps(v, ensure_ascii, indent, separators, sort_keys) as transformers' tojson filter calls it.
struct JsonStyle {
  bool ensure_ascii = false;
  int indent = -1;  // -1: none
  std::string indent_text;  // used when non-empty (indent given as a string)
  std::string item_sep, key_sep;
  bool custom_separators = false;
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonStyle& style);

}  // namespace fs::jinja

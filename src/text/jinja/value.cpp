#include "text/jinja/value.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "text/jinja/error.h"
#include "text/jinja/pystr.h"

namespace fs::jinja {

const Value* CallArgs::kwarg(std::string_view name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

Value* DictData::find(const Value& key) {
  for (auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

Value* DictData::find(std::string_view key) {
  for (auto& [k, v] : items)
    if (k.kind == Kind::String && k.s == key) return &v;
  return nullptr;
}

uint32_t nesting_of(const Value& v) {
  if (v.kind == Kind::Loop) return 1;
  if (v.list) return v.list->depth;
  if (v.dict) return v.dict->depth;
  return 0;
}

static uint32_t checked_depth(uint32_t child) {
  if (child + 1 > kMaxNesting) throw TemplateError("containers nested too deeply");
  return child + 1;
}

void ListData::append(Value v) {
  depth = std::max(depth, checked_depth(nesting_of(v)));
  items.push_back(std::move(v));
}

void DictData::set(const Value& key, Value value) {
  depth = std::max(depth, checked_depth(nesting_of(value)));
  if (Value* slot = find(key)) {
    *slot = std::move(value);
    return;
  }
  items.emplace_back(key, std::move(value));
}

Value Value::undefined(std::string hint) {
  Value v;
  v.s = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind = Kind::Bool;
  v.b = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind = Kind::Int;
  v.i = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.kind = Kind::Float;
  v.f = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.s = std::move(s);
  return v;
}
Value Value::new_list(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind = Kind::List;
  v.list = std::make_shared<ListData>();
  for (const Value& e : items) v.list->depth = std::max(v.list->depth, checked_depth(nesting_of(e)));
  v.list->items = std::move(items);
  v.list->tuple = tuple;
  return v;
}
Value Value::new_dict() {
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::make_shared<DictData>();
  return v;
}
Value Value::function(std::string name, NativeFn fn) {
  Value v;
  v.kind = Kind::Function;
  v.fn = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
  return v;
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: case Kind::None: return false;
    case Kind::Bool: return v.b;
    case Kind::Int: return v.i != 0;
    case Kind::Float: return v.f != 0;
    case Kind::String: return !v.s.empty();
    case Kind::List: return !v.list->items.empty();
    case Kind::Dict: return !v.dict->items.empty();
    default: return true;
  }
}

// Bounds recursion through self-containing containers (a list appended into itself).
struct RecursionGuard {
  static inline thread_local int level = 0;
  RecursionGuard() {
    if (++level > int(kMaxNesting) + 8) {
      level = 0;
      throw TemplateError("container refers to itself");
    }
  }
  ~RecursionGuard() {
    if (level > 0) --level;
  }
};

static std::string container_repr(const Value& v) {
  RecursionGuard guard;
  std::string out;
  if (v.kind == Kind::List) {
    bool tuple = v.list->tuple;
    out = tuple ? "(" : "[";
    for (size_t k = 0; k < v.list->items.size(); ++k) {
      if (k) out += ", ";
      out += to_repr(v.list->items[k]);
    }
    if (tuple && v.list->items.size() == 1) out += ",";
    out += tuple ? ")" : "]";
    return out;
  }
  out = "{";
  bool first = true;
  for (const auto& [k, val] : v.dict->items) {
    if (!first) out += ", ";
    first = false;
    out += to_repr(k) + ": " + to_repr(val);
  }
  return out + "}";
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return v.b ? "True" : "False";
    case Kind::Int: return std::to_string(v.i);
    case Kind::Float: return py_float_repr(v.f);
    case Kind::String: return v.s;
    case Kind::List: case Kind::Dict: return container_repr(v);
    case Kind::Namespace: {
      Value d = v;
      d.kind = Kind::Dict;
      return "<Namespace " + container_repr(d) + ">";
    }
    case Kind::Loop: return "<LoopContext>";
    case Kind::Function: return "<function " + v.fn->name + ">";
  }
  return "";
}

std::string to_repr(const Value& v) {
  if (v.kind == Kind::String) return py_string_repr(v.s);
  if (v.kind == Kind::Undefined) return "Undefined";
  return to_str(v);
}

bool equals(const Value& a, const Value& b) {
  RecursionGuard guard;
  if (a.is_numeric() && b.is_numeric()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined: case Kind::None: return true;
    case Kind::String: return a.s == b.s;
    case Kind::List: {
      if (a.list == b.list) return true;
      if (a.list->tuple != b.list->tuple || a.list->items.size() != b.list->items.size()) return false;
      for (size_t k = 0; k < a.list->items.size(); ++k)
        if (!equals(a.list->items[k], b.list->items[k])) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.dict == b.dict) return true;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        Value* other = b.dict->find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case Kind::Function: return a.fn == b.fn;
    case Kind::Loop: return a.list == b.list && a.i == b.i;
    default: return a.dict == b.dict;
  }
}

bool less_than(const Value& a, const Value& b) {
  if (a.is_numeric() && b.is_numeric()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.kind == Kind::String && b.kind == Kind::String) return a.s < b.s;
  if (a.kind == Kind::List && b.kind == Kind::List && a.list->tuple == b.list->tuple) {
    const auto &x = a.list->items, &y = b.list->items;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (equals(x[k], y[k])) continue;
      return less_than(x[k], y[k]);
    }
    return x.size() < y.size();
  }
  throw TemplateError("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return v.list->tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Loop: return "LoopContext";
    case Kind::Function: return "function";
  }
  return "object";
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > uint64_t(INT64_MAX)) return Value::number(double(u));
      return Value::integer(int64_t(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Value out = Value::new_list();
      out.list->items.reserve(j.size());
      for (const auto& e : j) out.list->append(from_json(e));
      return out;
    }
    case nlohmann::ordered_json::value_t::object: {
      Value out = Value::new_dict();
      for (const auto& [k, e] : j.items()) {
        Value item = from_json(e);
        out.dict->depth = std::max(out.dict->depth, checked_depth(nesting_of(item)));
        out.dict->items.emplace_back(Value::string(k), std::move(item));
      }
      return out;
    }
    default: return Value::none();
  }
}

static void dump_json(const Value& v, const JsonStyle& st, int level, std::string& out) {
  RecursionGuard guard;
  bool pretty = st.indent >= 0 || !st.indent_text.empty();
  std::string item_sep = st.custom_separators ? st.item_sep : pretty ? "," : ", ";
  std::string key_sep = st.custom_separators ? st.key_sep : ": ";
  std::string unit = !st.indent_text.empty() ? st.indent_text : std::string(size_t(std::max(st.indent, 0)), ' ');
  auto newline = [&](int lvl) {
    out += '\n';
    for (int k = 0; k < lvl; ++k) out += unit;
  };
  switch (v.kind) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.b ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.i); return;
    case Kind::Float:
      if (std::isnan(v.f)) out += "NaN";
      else if (std::isinf(v.f)) out += v.f < 0 ? "-Infinity" : "Infinity";
      else out += py_float_repr(v.f);
      return;
    case Kind::String: out += json_string(v.s, st.ensure_ascii); return;
    case Kind::List: {
      if (v.list->items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.list->items.size(); ++k) {
        if (k) out += item_sep;
        if (pretty) newline(level + 1);
        dump_json(v.list->items[k], st, level + 1, out);
      }
      if (pretty) newline(level);
      out += ']';
      return;
    }
    case Kind::Dict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<Value, Value>*> entries;
      for (const auto& e : v.dict->items) entries.push_back(&e);
      auto key_text = [](const Value& k) -> std::string {
        switch (k.kind) {
          case Kind::String: return k.s;
          case Kind::None: return "null";
          case Kind::Bool: return k.b ? "true" : "false";
          case Kind::Int: case Kind::Float: return to_str(k);
          default: throw TemplateError("keys must be str, int, float, bool or None, not " + type_name(k));
        }
      };
      if (st.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [&](auto* x, auto* y) { return less_than(x->first, y->first); });
      out += '{';
      bool first = true;
      for (auto* e : entries) {
        if (!first) out += item_sep;
        first = false;
        if (pretty) newline(level + 1);
        out += json_string(key_text(e->first), st.ensure_ascii);
        out += key_sep;
        dump_json(e->second, st, level + 1, out);
      }
      if (pretty) newline(level);
      out += '}';
      return;
    }
    default:
      throw TemplateError("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

std::string to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  dump_json(v, style, 0, out);
  return out;
}

}  // namespace fs::jinja

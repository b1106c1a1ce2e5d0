// Jinja2's built-in tests (`x is defined`, `x is divisibleby 3`, ...).
#include <unordered_map>

#include "text/jinja/error.h"
#include "text/jinja/pystr.h"
#include "text/jinja/runtime.h"

namespace fs::jinja {
namespace {

using TestFn = bool (*)(Runtime&, const Value&, CallArgs&);

const Value& need(Runtime& rt, const CallArgs& a, const char* test) {
  if (a.pos.empty()) rt.fail(std::string("test '") + test + "' needs an argument");
  return a.pos[0];
}

bool cased_check(const Value& v, bool want_lower) {
  bool any = false;
  for (char32_t c : utf8_decode(to_str(v))) {
    bool lower = py_islower(c), upper = py_isupper(c);
    if (lower || upper) {
      any = true;
      if (want_lower ? upper : lower) return false;
    }
  }
  return any;
}

bool t_defined(Runtime&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Runtime&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Runtime&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Runtime&, const Value& v, CallArgs&) { return v.kind == Kind::Bool; }
bool t_true(Runtime&, const Value& v, CallArgs&) { return v.kind == Kind::Bool && v.b; }
bool t_false(Runtime&, const Value& v, CallArgs&) { return v.kind == Kind::Bool && !v.b; }
bool t_integer(Runtime&, const Value& v, CallArgs&) { return v.kind == Kind::Int; }
bool t_float(Runtime&, const Value& v, CallArgs&) { return v.kind == Kind::Float; }
bool t_number(Runtime&, const Value& v, CallArgs&) { return v.is_numeric(); }
bool t_string(Runtime&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Runtime&, const Value& v, CallArgs&) { return v.is_dict(); }
bool t_iterable(Runtime&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}
bool t_sequence(Runtime&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}
bool t_callable(Runtime&, const Value& v, CallArgs&) { return v.kind == Kind::Function; }
bool t_escaped(Runtime&, const Value&, CallArgs&) { return false; }
bool t_sameas(Runtime& rt, const Value& v, CallArgs& a) {
  const Value& o = need(rt, a, "sameas");
  if (v.kind != o.kind) return false;
  if (v.list || v.dict || v.fn) return v.list == o.list && v.dict == o.dict && v.fn == o.fn;
  return equals(v, o);
}
bool t_eq(Runtime& rt, const Value& v, CallArgs& a) { return equals(v, need(rt, a, "eq")); }
bool t_ne(Runtime& rt, const Value& v, CallArgs& a) { return !equals(v, need(rt, a, "ne")); }
bool t_lt(Runtime& rt, const Value& v, CallArgs& a) { return less_than(v, need(rt, a, "lt")); }
bool t_gt(Runtime& rt, const Value& v, CallArgs& a) { return less_than(need(rt, a, "gt"), v); }
bool t_le(Runtime& rt, const Value& v, CallArgs& a) {
  const Value& o = need(rt, a, "le");
  return less_than(v, o) || equals(v, o);
}
bool t_ge(Runtime& rt, const Value& v, CallArgs& a) {
  const Value& o = need(rt, a, "ge");
  return less_than(o, v) || equals(v, o);
}
bool t_in(Runtime& rt, const Value& v, CallArgs& a) {
  const Value& c = need(rt, a, "in");
  if (c.is_string()) return v.is_string() && c.s.find(v.s) != std::string::npos;
  if (c.is_list()) {
    for (const Value& x : c.list->items)
      if (equals(x, v)) return true;
    return false;
  }
  if (c.is_dict()) return c.dict->find(v) != nullptr;
  rt.fail("argument of type '" + type_name(c) + "' is not iterable");
}
bool t_odd(Runtime& rt, const Value& v, CallArgs&) {
  if (!v.is_integral()) rt.fail("odd needs an integer");
  return v.as_int() % 2 != 0;
}
bool t_even(Runtime& rt, const Value& v, CallArgs&) {
  if (!v.is_integral()) rt.fail("even needs an integer");
  return v.as_int() % 2 == 0;
}
bool t_divisibleby(Runtime& rt, const Value& v, CallArgs& a) {
  const Value& d = need(rt, a, "divisibleby");
  if (!v.is_integral() || !d.is_integral()) rt.fail("divisibleby needs integers");
  if (d.as_int() == 0) rt.fail("integer division or modulo by zero");
  if (d.as_int() == -1) return true;
  return v.as_int() % d.as_int() == 0;
}
bool t_lower(Runtime&, const Value& v, CallArgs&) { return cased_check(v, true); }
bool t_upper(Runtime&, const Value& v, CallArgs&) { return cased_check(v, false); }

const std::unordered_map<std::string, TestFn>& table() {
  static const std::unordered_map<std::string, TestFn> t = {
      {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"boolean", t_boolean},
      {"true", t_true}, {"false", t_false}, {"integer", t_integer}, {"float", t_float}, {"number", t_number},
      {"string", t_string}, {"mapping", t_mapping}, {"iterable", t_iterable}, {"sequence", t_sequence},
      {"callable", t_callable}, {"escaped", t_escaped}, {"sameas", t_sameas}, {"eq", t_eq}, {"equalto", t_eq},
      {"==", t_eq}, {"ne", t_ne}, {"!=", t_ne}, {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"le", t_le},
      {"<=", t_le}, {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt}, {"ge", t_ge}, {">=", t_ge},
      {"in", t_in}, {"odd", t_odd}, {"even", t_even}, {"divisibleby", t_divisibleby}, {"lower", t_lower},
      {"upper", t_upper},
  };
  return t;
}

}  // namespace

bool apply_test(Runtime& rt, const std::string& name, const Value& subject, CallArgs& args) {
  if (name == "filter" || name == "test") {
    const Value& n = subject;  // `'upper' is filter` asks about the name on the left
    return n.is_string() && (name == "test" ? table().count(n.s) > 0 : filter_exists(n.s));
  }
  auto it = table().find(name);
  if (it == table().end()) rt.fail("no test named '" + name + "'");
  return it->second(rt, subject, args);
}

}  // namespace fs::jinja

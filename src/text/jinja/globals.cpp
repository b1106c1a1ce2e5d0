// Functions every template can call: range, namespace, dict, raise_exception, strftime_now; and `%` formatting.
#include <cstdio>
#include <ctime>

#include "text/jinja/error.h"
#include "text/jinja/runtime.h"

namespace fs::jinja {
namespace {

Value range_fn(Runtime& rt, CallArgs& a) {
  if (a.pos.empty() || a.pos.size() > 3) rt.fail("range expected 1 to 3 arguments");
  for (const Value& v : a.pos)
    if (!v.is_integral()) rt.fail("'" + type_name(v) + "' object cannot be interpreted as an integer");
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = a.pos[0].as_int();
  } else {
    start = a.pos[0].as_int();
    stop = a.pos[1].as_int();
    if (a.pos.size() == 3) step = a.pos[2].as_int();
  }
  if (step == 0) rt.fail("range() arg 3 must not be zero");
  __int128 count = 0;
  if (step > 0 && stop > start) count = ((__int128)stop - start + step - 1) / step;
  if (step < 0 && stop < start) count = ((__int128)start - stop - step - 1) / -step;
  rt.check_items(size_t(std::min<__int128>(count, (__int128)SIZE_MAX / 2)));
  rt.step(uint64_t(count));
  std::vector<Value> items;
  items.reserve(size_t(count));
  for (int64_t k = 0; k < int64_t(count); ++k) items.push_back(Value::integer(start + k * step));
  return Value::new_list(std::move(items));
}

Value namespace_fn(Runtime& rt, CallArgs& a) {
  Value ns;
  ns.kind = Kind::Namespace;
  ns.dict = std::make_shared<DictData>();
  for (const Value& p : a.pos) {
    if (!p.is_dict()) rt.fail("namespace() positional arguments must be mappings");
    for (const auto& [k, v] : p.dict->items) ns.dict->set(k, v);
  }
  for (const auto& [k, v] : a.kw) ns.dict->set(Value::string(k), v);
  return ns;
}

Value dict_fn(Runtime& rt, CallArgs& a) {
  Value d = Value::new_dict();
  for (const Value& p : a.pos) {
    if (!p.is_dict()) rt.fail("dict() positional arguments must be mappings");
    for (const auto& [k, v] : p.dict->items) d.dict->set(k, v);
  }
  for (const auto& [k, v] : a.kw) d.dict->set(Value::string(k), v);
  return d;
}

Value raise_fn(Runtime&, CallArgs& a) {
  throw RaisedError(a.pos.empty() ? std::string() : to_str(a.pos[0]));
}

Value strftime_fn(Runtime& rt, CallArgs& a) {
  if (a.pos.empty() || !a.pos[0].is_string()) rt.fail("strftime_now needs a format string");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[512];
  size_t n = std::strftime(buf, sizeof buf, a.pos[0].s.c_str(), &tm);
  return Value::string(std::string(buf, n));
}

}  // namespace

void add_builtins(Frame& globals) {
  globals.vars["range"] = Value::function("range", range_fn);
  globals.vars["namespace"] = Value::function("namespace", namespace_fn);
  globals.vars["dict"] = Value::function("dict", dict_fn);
  globals.vars["raise_exception"] = Value::function("raise_exception", raise_fn);
  globals.vars["strftime_now"] = Value::function("strftime_now", strftime_fn);
}

std::string percent_format(Runtime& rt, const std::string& fmt, const Value& args) {
  std::vector<Value> positional;
  const Value* mapping = nullptr;
  if (args.is_list() && args.list->tuple) positional = args.list->items;
  else if (args.is_dict()) mapping = &args;
  else positional.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) rt.fail("incomplete format");
    const Value* value = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos || !mapping) rt.fail("format requires a mapping");
      Value* v = mapping->dict->find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!v) rt.fail("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
      value = v;
      i = close + 1;
    }
    std::string spec = "%";
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) spec += fmt[i++];
    while (i < fmt.size() && ((fmt[i] >= '0' && fmt[i] <= '9') || fmt[i] == '.')) spec += fmt[i++];
    if (i >= fmt.size()) rt.fail("incomplete format");
    char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!value) {
      if (next >= positional.size()) rt.fail("not enough arguments for format string");
      value = &positional[next++];
    }
    char buf[512];
    if (conv == 's' || conv == 'r' || conv == 'a') {
      std::string s = conv == 's' ? to_str(*value) : to_repr(*value);
      spec += 's';
      if (spec == "%s") {
        out += s;
      } else {
        std::snprintf(buf, sizeof buf, spec.c_str(), s.c_str());
        out += buf;
      }
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
      if (!value->is_numeric()) rt.fail("%" + std::string(1, conv) + " format: a real number is required");
      spec += "ll";
      spec += conv == 'i' ? 'd' : conv;
      long long n = value->kind == Kind::Float ? (long long)value->f : (long long)value->as_int();
      std::snprintf(buf, sizeof buf, spec.c_str(), n);
      out += buf;
    } else if (std::string_view("feEgG").find(conv) != std::string_view::npos) {
      if (!value->is_numeric()) rt.fail("must be real number, not " + type_name(*value));
      spec += conv;
      std::snprintf(buf, sizeof buf, spec.c_str(), value->as_double());
      out += buf;
    } else {
      rt.fail(std::string("unsupported format character '") + conv + "'");
    }
    rt.check_size(out.size());
  }
  if (!mapping && next < positional.size()) rt.fail("not all arguments converted during string formatting");
  return out;
}

}  // namespace fs::jinja

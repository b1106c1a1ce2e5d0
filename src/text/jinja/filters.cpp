// Jinja2's built-in filters, plus tojson as transformers defines it (json.dumps, ensure_ascii off).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "text/jinja/error.h"
#include "text/jinja/pystr.h"
#include "text/jinja/runtime.h"

namespace fs::jinja {
namespace {

using FilterFn = Value (*)(Runtime&, Value&, CallArgs&);

const Value* arg(const CallArgs& a, size_t index, const char* name) {
  if (index < a.pos.size()) return &a.pos[index];
  return a.kwarg(name);
}

bool flag(const CallArgs& a, size_t index, const char* name, bool fallback) {
  const Value* v = arg(a, index, name);
  return v ? truthy(*v) : fallback;
}

int64_t int_arg(Runtime& rt, const CallArgs& a, size_t index, const char* name, int64_t fallback) {
  const Value* v = arg(a, index, name);
  if (!v || v->is_none()) return fallback;
  if (!v->is_integral()) rt.fail(std::string("argument '") + name + "' must be an integer");
  return v->as_int();
}

std::string text(const Value& v) { return to_str(v); }

// Jinja2's attribute getter: "a.b.0" looks up each part as an item first, then an attribute.
Value get_path(Runtime& rt, const Value& obj, const std::string& path) {
  Value cur = obj;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (cur.is_undefined()) return cur;
    cur = digits ? rt.get_item(cur, Value::integer(std::stoll(part))) : rt.get_item(cur, Value::string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// The key a sort or unique compares by: the attribute, lowercased unless case sensitive.
Value sort_key(Runtime& rt, const Value& item, const Value* attribute, bool case_sensitive) {
  Value k = attribute && !attribute->is_none() ? get_path(rt, item, to_str(*attribute)) : item;
  if (!case_sensitive && k.is_string()) {
    std::u32string cps = utf8_decode(k.s);
    for (char32_t& c : cps) c = py_lower(c);
    k.s = utf8_encode(cps);
  }
  return k;
}

Value f_default(Runtime&, Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "default_value");
  bool boolean = flag(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) return d ? *d : Value::string("");
  return v;
}

Value f_length(Runtime& rt, Value& v, CallArgs&) {
  switch (v.kind) {
    case Kind::Undefined: return Value::integer(0);
    case Kind::String: return Value::integer(int64_t(utf8_length(v.s)));
    case Kind::List: return Value::integer(int64_t(v.list->items.size()));
    case Kind::Dict: case Kind::Namespace: return Value::integer(int64_t(v.dict->items.size()));
    default: rt.fail("object of type '" + type_name(v) + "' has no len()");
  }
}

Value f_join(Runtime& rt, Value& v, CallArgs& a) {
  const Value* sep_v = arg(a, 0, "d");
  std::string sep = sep_v ? text(*sep_v) : "";
  const Value* attribute = arg(a, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : rt.iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += text(attribute ? get_path(rt, item, text(*attribute)) : item);
    rt.check_size(out.size());
  }
  rt.step(out.size() / 256);
  return Value::string(std::move(out));
}

Value f_trim(Runtime&, Value& v, CallArgs& a) {
  const Value* chars = arg(a, 0, "chars");
  std::string set = chars && !chars->is_none() ? text(*chars) : "";
  return Value::string(py_strip(text(v), chars && !chars->is_none() ? &set : nullptr, true, true));
}

Value map_case(const Value& v, char32_t (*fn)(char32_t)) {
  std::u32string cps = utf8_decode(text(v));
  for (char32_t& c : cps) c = fn(c);
  return Value::string(utf8_encode(cps));
}

Value f_upper(Runtime&, Value& v, CallArgs&) { return Value::string(py_upper_string(text(v))); }
Value f_lower(Runtime&, Value& v, CallArgs&) { return map_case(v, py_lower); }

Value f_capitalize(Runtime&, Value& v, CallArgs&) {
  std::u32string cps = utf8_decode(text(v));
  for (size_t k = 0; k < cps.size(); ++k) cps[k] = k == 0 ? py_upper(cps[k]) : py_lower(cps[k]);
  return Value::string(utf8_encode(cps));
}

Value f_title(Runtime&, Value& v, CallArgs&) {
  // Jinja2 splits before runs of [-\s({\[<] and capitalizes each piece.
  std::u32string cps = utf8_decode(text(v));
  auto is_sep = [](char32_t c) {
    return py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
  };
  bool at_start = true;
  for (char32_t& c : cps) {
    if (is_sep(c)) {
      at_start = true;
      continue;
    }
    c = at_start ? py_upper(c) : py_lower(c);
    at_start = false;
  }
  return Value::string(utf8_encode(cps));
}

std::string replace_all(Runtime& rt, const std::string& s, const std::string& old, const std::string& repl,
                        int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    std::u32string cps = utf8_decode(s);
    for (size_t k = 0; k <= cps.size(); ++k) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (k < cps.size()) utf8_append(out, cps[k]);
      rt.check_size(out.size());
    }
    return out;
  }
  size_t pos = 0;
  while (true) {
    size_t hit = (count < 0 || done < count) ? s.find(old, pos) : std::string::npos;
    if (hit == std::string::npos) {
      out.append(s, pos, std::string::npos);
      break;
    }
    out.append(s, pos, hit - pos);
    out += repl;
    pos = hit + old.size();
    ++done;
    rt.check_size(out.size());
  }
  rt.check_size(out.size());
  return out;
}

Value f_replace(Runtime& rt, Value& v, CallArgs& a) {
  const Value* old = arg(a, 0, "old");
  const Value* repl = arg(a, 1, "new");
  if (!old || !repl) rt.fail("replace() needs old and new");
  int64_t count = int_arg(rt, a, 2, "count", -1);
  return Value::string(replace_all(rt, text(v), text(*old), text(*repl), count));
}

Value f_first(Runtime& rt, Value& v, CallArgs&) {
  if (v.is_list()) return v.list->items.empty() ? Value::undefined("No first item, sequence was empty.") : v.list->items.front();
  std::vector<Value> items = rt.iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Runtime& rt, Value& v, CallArgs&) {
  if (v.is_list()) return v.list->items.empty() ? Value::undefined("No last item, sequence was empty.") : v.list->items.back();
  std::vector<Value> items = rt.iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_string(Runtime&, Value& v, CallArgs&) { return v.is_string() ? v : Value::string(text(v)); }

bool parse_int(std::string s, int base, int64_t& out) {
  s = py_strip(s, nullptr, true, true);
  std::string clean;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '_' && k > 0 && k + 1 < s.size() && std::isalnum((unsigned char)s[k - 1])) continue;
    clean += s[k];
  }
  if (clean.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(clean.c_str(), &end, base);
  if (*end || errno || std::isspace((unsigned char)clean[0])) return false;
  out = v;
  return true;
}

bool parse_float(const std::string& raw, double& out) {
  std::string s = py_strip(raw, nullptr, true, true);
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end) return false;
  std::string low;
  for (char c : s) low += char(std::tolower((unsigned char)c));
  if (low.find("0x") != std::string::npos) return false;
  out = v;
  return true;
}

Value f_int(Runtime& rt, Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "default");
  int64_t base = int_arg(rt, a, 1, "base", 10);
  Value fallback = d ? *d : Value::integer(0);
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.kind == Kind::Float) {
    if (!std::isfinite(v.f) || std::fabs(v.f) > 9.2e18) return fallback;
    return Value::integer(int64_t(v.f));
  }
  if (v.is_string()) {
    int64_t out;
    if (parse_int(v.s, int(base), out)) return Value::integer(out);
    double f;
    if (parse_float(v.s, f) && std::isfinite(f) && std::fabs(f) < 9.2e18) return Value::integer(int64_t(f));
  }
  return fallback;
}

Value f_float(Runtime&, Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "default");
  Value fallback = d ? *d : Value::number(0.0);
  if (v.is_numeric()) return Value::number(v.as_double());
  double f;
  if (v.is_string() && parse_float(v.s, f)) return Value::number(f);
  return fallback;
}

Value f_abs(Runtime& rt, Value& v, CallArgs&) {
  if (v.kind == Kind::Float) return Value::number(std::fabs(v.f));
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) rt.fail("integer overflow");
    return Value::integer(std::llabs(v.as_int()));
  }
  rt.fail("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_round(Runtime& rt, Value& v, CallArgs& a) {
  int64_t precision = int_arg(rt, a, 0, "precision", 0);
  const Value* method_v = arg(a, 1, "method");
  std::string method = method_v ? text(*method_v) : "common";
  if (!v.is_numeric()) rt.fail("round() needs a number");
  if (method == "common") {
    if (v.is_integral()) return Value::integer(v.as_int());
    if (!std::isfinite(v.f)) return v;
    if (precision == 0) return Value::number(std::nearbyint(v.f));
    if (precision < 0 || precision > 300) rt.fail("round() precision out of range");
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", int(precision), v.f);
    return Value::number(std::strtod(buf, nullptr));
  }
  if (method != "floor" && method != "ceil") rt.fail("method must be common, ceil or floor");
  double scale = std::pow(10.0, double(precision));
  double x = v.as_double() * scale;
  return Value::number((method == "floor" ? std::floor(x) : std::ceil(x)) / scale);
}

Value f_items(Runtime& rt, Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::new_list();
  if (v.kind != Kind::Dict) rt.fail("can only get item pairs from a mapping");
  std::vector<Value> out;
  for (const auto& [k, val] : v.dict->items) out.push_back(Value::new_list({k, val}, true));
  return Value::new_list(std::move(out));
}

Value f_list(Runtime& rt, Value& v, CallArgs&) {
  std::vector<Value> items = rt.iterate(v);
  rt.step(items.size());
  return Value::new_list(std::move(items));
}

Value f_reverse(Runtime& rt, Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string cps = utf8_decode(v.s);
    std::reverse(cps.begin(), cps.end());
    return Value::string(utf8_encode(cps));
  }
  std::vector<Value> items = rt.iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::new_list(std::move(items));
}

Value f_tojson(Runtime& rt, Value& v, CallArgs& a) {
  JsonStyle st;
  const Value* indent = arg(a, 0, "indent");
  if (indent && !indent->is_none()) {
    if (indent->is_string()) st.indent_text = indent->s, st.indent = 0;
    else if (indent->is_integral()) st.indent = int(std::clamp<int64_t>(indent->as_int(), 0, 64));
    else rt.fail("indent must be an integer or a string");
  }
  if (const Value* e = a.kwarg("ensure_ascii")) st.ensure_ascii = truthy(*e);
  if (const Value* s = a.kwarg("sort_keys")) st.sort_keys = truthy(*s);
  if (const Value* sep = a.kwarg("separators"); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->list->items.size() != 2) rt.fail("separators must be a pair");
    st.custom_separators = true;
    st.item_sep = text(sep->list->items[0]);
    st.key_sep = text(sep->list->items[1]);
  }
  if (v.is_undefined()) rt.fail("Object of type Undefined is not JSON serializable");
  std::string out = to_json(v, st);
  rt.check_size(out.size());
  rt.step(out.size() / 64);
  return Value::string(std::move(out));
}

Value f_indent(Runtime& rt, Value& v, CallArgs& a) {
  const Value* width = arg(a, 0, "width");
  std::string unit = !width ? "    " : width->is_string() ? width->s : std::string();
  if (width && !width->is_string()) {
    if (!width->is_integral()) rt.fail("indent width must be an integer or a string");
    unit.assign(size_t(std::clamp<int64_t>(width->as_int(), 0, 1024)), ' ');
  }
  bool first = flag(a, 1, "first", false), blank = flag(a, 2, "blank", false);
  std::string s = text(v) + "\n";
  std::vector<std::string> lines = py_splitlines(s);
  std::string out;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) out += (k ? "\n" + unit : "") + lines[k];
  } else if (!lines.empty()) {
    out = lines[0];
    for (size_t k = 1; k < lines.size(); ++k) out += "\n" + (lines[k].empty() ? "" : unit) + lines[k];
  }
  if (first) out = unit + out;
  rt.check_size(out.size());
  return Value::string(std::move(out));
}

Value f_center(Runtime& rt, Value& v, CallArgs& a) {
  int64_t width = int_arg(rt, a, 0, "width", 80);
  std::string s = text(v);
  int64_t len = int64_t(utf8_length(s));
  if (width <= len) return Value::string(s);
  rt.check_size(size_t(width));
  int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
  return Value::string(std::string(size_t(left), ' ') + s + std::string(size_t(marg - left), ' '));
}

Value f_wordcount(Runtime&, Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(text(v))) {
    bool w = py_isalnum(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_safe(Runtime&, Value& v, CallArgs&) { return Value::string(text(v)); }

Value f_escape(Runtime&, Value& v, CallArgs&) {
  std::string out;
  for (char c : text(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value::string(std::move(out));
}

Value f_map(Runtime& rt, Value& v, CallArgs& a) {
  std::vector<Value> out;
  if (const Value* attribute = a.kwarg("attribute")) {
    const Value* d = a.kwarg("default");
    for (const Value& item : rt.iterate(v)) {
      Value x = get_path(rt, item, text(*attribute));
      out.push_back(x.is_undefined() && d ? *d : x);
    }
    return Value::new_list(std::move(out));
  }
  if (a.pos.empty()) rt.fail("map requires a filter name or attribute=");
  std::string name = text(a.pos[0]);
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& item : rt.iterate(v)) {
    CallArgs copy = rest;
    out.push_back(apply_filter(rt, name, item, copy));
  }
  return Value::new_list(std::move(out));
}

Value select_impl(Runtime& rt, Value& v, CallArgs& a, bool by_attr, bool keep) {
  size_t next = 0;
  std::string attribute;
  if (by_attr) {
    if (a.pos.empty()) rt.fail("selectattr/rejectattr need an attribute");
    attribute = text(a.pos[next++]);
  }
  std::string test = next < a.pos.size() ? text(a.pos[next++]) : "";
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + long(std::min(next, a.pos.size())), a.pos.end());
  rest.kw = a.kw;
  std::vector<Value> out;
  for (const Value& item : rt.iterate(v)) {
    Value subject = by_attr ? get_path(rt, item, attribute) : item;
    CallArgs copy = rest;
    bool ok = test.empty() ? truthy(subject) : apply_test(rt, test, subject, copy);
    if (ok == keep) out.push_back(item);
  }
  return Value::new_list(std::move(out));
}

Value f_select(Runtime& rt, Value& v, CallArgs& a) { return select_impl(rt, v, a, false, true); }
Value f_reject(Runtime& rt, Value& v, CallArgs& a) { return select_impl(rt, v, a, false, false); }
Value f_selectattr(Runtime& rt, Value& v, CallArgs& a) { return select_impl(rt, v, a, true, true); }
Value f_rejectattr(Runtime& rt, Value& v, CallArgs& a) { return select_impl(rt, v, a, true, false); }

Value f_sort(Runtime& rt, Value& v, CallArgs& a) {
  bool reverse = flag(a, 0, "reverse", false), cs = flag(a, 1, "case_sensitive", false);
  const Value* attribute = arg(a, 2, "attribute");
  std::vector<Value> items = rt.iterate(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) keyed.emplace_back(sort_key(rt, item, attribute, cs), item);
  rt.step(items.size() * 4);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less_than(y.first, x.first) : less_than(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return Value::new_list(std::move(out));
}

Value f_dictsort(Runtime& rt, Value& v, CallArgs& a) {
  bool cs = flag(a, 0, "case_sensitive", false);
  const Value* by_v = arg(a, 1, "by");
  bool by_value = by_v && text(*by_v) == "value";
  bool reverse = flag(a, 2, "reverse", false);
  if (v.kind != Kind::Dict) rt.fail("dictsort needs a mapping");
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [k, val] : v.dict->items)
    keyed.emplace_back(sort_key(rt, by_value ? val : k, nullptr, cs), Value::new_list({k, val}, true));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less_than(y.first, x.first) : less_than(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& [k, pair] : keyed) out.push_back(std::move(pair));
  return Value::new_list(std::move(out));
}

Value f_unique(Runtime& rt, Value& v, CallArgs& a) {
  bool cs = flag(a, 0, "case_sensitive", false);
  const Value* attribute = arg(a, 1, "attribute");
  std::vector<Value> seen, out;
  for (const Value& item : rt.iterate(v)) {
    Value k = sort_key(rt, item, attribute, cs);
    rt.step(seen.size() / 16);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
    seen.push_back(k);
    out.push_back(item);
  }
  return Value::new_list(std::move(out));
}

Value min_max(Runtime& rt, Value& v, CallArgs& a, bool want_max) {
  bool cs = flag(a, 0, "case_sensitive", false);
  const Value* attribute = arg(a, 1, "attribute");
  std::vector<Value> items = rt.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(rt, items[0], attribute, cs);
  for (size_t k = 1; k < items.size(); ++k) {
    Value key = sort_key(rt, items[k], attribute, cs);
    if (want_max ? less_than(best_key, key) : less_than(key, best_key)) best = k, best_key = key;
  }
  return items[best];
}

Value f_min(Runtime& rt, Value& v, CallArgs& a) { return min_max(rt, v, a, false); }
Value f_max(Runtime& rt, Value& v, CallArgs& a) { return min_max(rt, v, a, true); }

Value f_sum(Runtime& rt, Value& v, CallArgs& a) {
  const Value* attribute = arg(a, 0, "attribute");
  const Value* start = arg(a, 1, "start");
  Value total = start ? *start : Value::integer(0);
  CallArgs none;
  for (const Value& item : rt.iterate(v)) {
    Value x = attribute && !attribute->is_none() ? get_path(rt, item, text(*attribute)) : item;
    if (!total.is_numeric() || !x.is_numeric()) rt.fail("sum() needs numbers");
    if (total.is_integral() && x.is_integral()) {
      int64_t r;
      if (__builtin_add_overflow(total.as_int(), x.as_int(), &r)) rt.fail("integer overflow");
      total = Value::integer(r);
    } else {
      total = Value::number(total.as_double() + x.as_double());
    }
  }
  return total;
}

Value f_attr(Runtime& rt, Value& v, CallArgs& a) {
  const Value* name = arg(a, 0, "name");
  if (!name) rt.fail("attr() needs a name");
  return rt.get_attr(v, text(*name));
}

Value f_format(Runtime& rt, Value& v, CallArgs& a) {
  if (!a.kw.empty()) {
    Value d = Value::new_dict();
    for (auto& [k, x] : a.kw) d.dict->set(Value::string(k), x);
    return Value::string(percent_format(rt, text(v), d));
  }
  return Value::string(percent_format(rt, text(v), Value::new_list(a.pos, true)));
}

const std::unordered_map<std::string, FilterFn>& table() {
  static const std::unordered_map<std::string, FilterFn> t = {
      {"abs", f_abs}, {"attr", f_attr}, {"capitalize", f_capitalize}, {"center", f_center},
      {"count", f_length}, {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort},
      {"e", f_escape}, {"escape", f_escape}, {"first", f_first}, {"float", f_float},
      {"forceescape", f_escape}, {"format", f_format}, {"indent", f_indent}, {"int", f_int},
      {"items", f_items}, {"join", f_join}, {"last", f_last}, {"length", f_length}, {"list", f_list},
      {"lower", f_lower}, {"map", f_map}, {"max", f_max}, {"min", f_min}, {"reject", f_reject},
      {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse}, {"round", f_round},
      {"safe", f_safe}, {"select", f_select}, {"selectattr", f_selectattr}, {"sort", f_sort},
      {"string", f_string}, {"sum", f_sum}, {"title", f_title}, {"tojson", f_tojson}, {"trim", f_trim},
      {"unique", f_unique}, {"upper", f_upper}, {"wordcount", f_wordcount},
  };
  return t;
}

}  // namespace

std::string replace_text(Runtime& rt, const std::string& s, const std::string& old, const std::string& repl,
                         int64_t count) {
  return replace_all(rt, s, old, repl, count);
}

bool filter_exists(const std::string& name) { return table().count(name) > 0; }

Value apply_filter(Runtime& rt, const std::string& name, Value subject, CallArgs& args) {
  auto it = table().find(name);
  if (it == table().end()) rt.fail("no filter named '" + name + "'");
  return it->second(rt, subject, args);
}

}  // namespace fs::jinja

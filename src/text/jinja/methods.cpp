// Python methods templates call on values: str.strip/split/startswith/..., list.append/index/count,
// dict.items/keys/values/get.
#include <algorithm>

#include "text/jinja/error.h"
#include "text/jinja/pystr.h"
#include "text/jinja/runtime.h"

namespace fs::jinja {
namespace {

const Value* arg(const CallArgs& a, size_t index, const char* name) {
  if (index < a.pos.size()) return &a.pos[index];
  return a.kwarg(name);
}

const std::string& str_arg(Runtime& rt, const CallArgs& a, size_t index, const char* method) {
  const Value* v = arg(a, index, "");
  if (!v || !v->is_string()) rt.fail(std::string(method) + "() argument must be str");
  return v->s;
}

// split / rsplit with Python's rules; `sep` null splits on whitespace runs.
std::vector<std::string> split(const std::string& s, const std::string* sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
        size_t hit = s.find(*sep, pos);
        if (hit == std::string::npos) break;
        parts.push_back(s.substr(pos, hit - pos));
        pos = hit + sep->size();
      }
      parts.push_back(s.substr(pos));
      return parts;
    }
    size_t end = s.size();
    while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string::npos) break;
      parts.push_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    parts.push_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  std::u32string cps = utf8_decode(s);
  if (from_right) std::reverse(cps.begin(), cps.end());
  size_t i = 0, n = cps.size();
  while (true) {
    while (i < n && py_isspace(cps[i])) ++i;
    if (i >= n) break;
    if (maxsplit >= 0 && int64_t(parts.size()) >= maxsplit) {
      size_t e = n;
      while (e > i && py_isspace(cps[e - 1])) --e;
      std::u32string rest = cps.substr(i, e - i);
      if (from_right) std::reverse(rest.begin(), rest.end());
      parts.push_back(utf8_encode(rest));
      break;
    }
    size_t j = i;
    while (j < n && !py_isspace(cps[j])) ++j;
    std::u32string word = cps.substr(i, j - i);
    if (from_right) std::reverse(word.begin(), word.end());
    parts.push_back(utf8_encode(word));
    i = j;
  }
  if (from_right) std::reverse(parts.begin(), parts.end());
  return parts;
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::new_list(std::move(items));
}

bool affix_match(Runtime& rt, const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) rt.fail(std::string(prefix ? "startswith" : "endswith") + " first arg must be str or a tuple of str");
    if (v.s.size() > s.size()) return false;
    return prefix ? s.compare(0, v.s.size(), v.s) == 0 : s.compare(s.size() - v.s.size(), v.s.size(), v.s) == 0;
  };
  if (affix.is_list() && affix.list->tuple) {
    for (const Value& v : affix.list->items)
      if (one(v)) return true;
    return false;
  }
  return one(affix);
}

int64_t count_of(const std::string& s, const std::string& sub) {
  if (sub.empty()) return int64_t(utf8_length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

// Byte offset → code point index.
int64_t cp_index(const std::string& s, size_t byte) { return int64_t(utf8_length(std::string_view(s).substr(0, byte))); }

std::string py_format(Runtime& rt, const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      else rt.fail("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) rt.fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    bool repr = false;
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      repr = field.substr(bang + 1) == "r";
      field = field.substr(0, bang);
    }
    if (field.find(':') != std::string::npos) rt.fail("format specs are not supported in str.format");
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= a.pos.size()) rt.fail("Replacement index out of range for positional args tuple");
      v = &a.pos[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t k = std::stoul(field);
      if (k >= a.pos.size()) rt.fail("Replacement index out of range for positional args tuple");
      v = &a.pos[k];
    } else {
      v = a.kwarg(field);
      if (!v) rt.fail("KeyError: '" + field + "'");
    }
    out += repr ? to_repr(*v) : to_str(*v);
    rt.check_size(out.size());
  }
  return out;
}

Value string_method(Runtime& rt, const std::string& s, const std::string& name, CallArgs& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value* chars = arg(a, 0, "chars");
    bool use = chars && !chars->is_none();
    if (use && !chars->is_string()) rt.fail(name + " arg must be None or str");
    return Value::string(py_strip(s, use ? &chars->s : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const Value* sep = arg(a, 0, "sep");
    const Value* maxsplit = arg(a, 1, "maxsplit");
    int64_t m = maxsplit && maxsplit->is_integral() ? maxsplit->as_int() : -1;
    bool use = sep && !sep->is_none();
    if (use && (!sep->is_string() || sep->s.empty())) rt.fail("empty separator");
    std::vector<std::string> parts = split(s, use ? &sep->s : nullptr, m, name == "rsplit");
    rt.check_items(parts.size());
    rt.step(parts.size());
    return string_list(std::move(parts));
  }
  if (name == "splitlines") return string_list(py_splitlines(s));
  if (name == "startswith" || name == "endswith") {
    const Value* affix = arg(a, 0, "prefix");
    if (!affix) rt.fail(name + "() takes at least 1 argument");
    return Value::boolean(affix_match(rt, s, *affix, name == "startswith"));
  }
  if (name == "replace") {
    const std::string& old = str_arg(rt, a, 0, "replace");
    const std::string& repl = str_arg(rt, a, 1, "replace");
    const Value* count = arg(a, 2, "count");
    return Value::string(replace_text(rt, s, old, repl, count && count->is_integral() ? count->as_int() : -1));
  }
  if (name == "upper") return Value::string(py_upper_string(s));
  if (name == "lower" || name == "title" || name == "capitalize" || name == "swapcase") {
    std::u32string cps = utf8_decode(s);
    bool prev_cased = false;
    for (size_t k = 0; k < cps.size(); ++k) {
      char32_t c = cps[k];
      bool cased = py_upper(c) != c || py_lower(c) != c;
      if (name == "upper") c = py_upper(c);
      else if (name == "lower") c = py_lower(c);
      else if (name == "capitalize") c = k == 0 ? py_upper(c) : py_lower(c);
      else if (name == "swapcase") c = py_isupper(c) ? py_lower(c) : py_upper(c);
      else c = prev_cased ? py_lower(c) : py_upper(c);
      prev_cased = cased;
      cps[k] = c;
    }
    return Value::string(utf8_encode(cps));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const std::string& sub = str_arg(rt, a, 0, name.c_str());
    size_t pos = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (pos == std::string::npos) {
      if (name.find("index") != std::string::npos) rt.fail("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(cp_index(s, pos));
  }
  if (name == "count") return Value::integer(count_of(s, str_arg(rt, a, 0, "count")));
  if (name == "join") {
    const Value* items = arg(a, 0, "iterable");
    if (!items) rt.fail("join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const Value& v : rt.iterate(*items)) {
      if (!v.is_string()) rt.fail("sequence item: expected str instance, " + type_name(v) + " found");
      if (!first) out += s;
      first = false;
      out += v.s;
      rt.check_size(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "format") return Value::string(py_format(rt, s, a));
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string& x = str_arg(rt, a, 0, name.c_str());
    bool prefix = name == "removeprefix";
    if (affix_match(rt, s, Value::string(x), prefix))
      return Value::string(prefix ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
    return Value::string(s);
  }
  std::u32string cps = utf8_decode(s);
  auto all = [&](bool (*pred)(char32_t)) { return !cps.empty() && std::all_of(cps.begin(), cps.end(), pred); };
  if (name == "isdigit") return Value::boolean(all(py_isdigit));
  if (name == "isalpha") return Value::boolean(all(py_isalpha));
  if (name == "isalnum") return Value::boolean(all(py_isalnum));
  if (name == "isspace") return Value::boolean(all(py_isspace));
  if (name == "islower" || name == "isupper") {
    bool any = false, want_lower = name == "islower";
    for (char32_t c : cps) {
      if (py_islower(c) || py_isupper(c)) {
        any = true;
        if (want_lower ? py_isupper(c) : py_islower(c)) return Value::boolean(false);
      }
    }
    return Value::boolean(any);
  }
  rt.fail("'str' object has no attribute '" + name + "'");
}

Value list_method(Runtime& rt, const Value& self, const std::string& name, CallArgs& a) {
  auto& items = self.list->items;
  if (name == "append") {
    if (self.list->tuple) rt.fail("'tuple' object has no attribute 'append'");
    if (a.pos.size() != 1) rt.fail("append() takes exactly one argument");
    rt.check_items(items.size() + 1);
    self.list->append(a.pos[0]);
    return Value::none();
  }
  if (name == "extend") {
    if (a.pos.size() != 1) rt.fail("extend() takes exactly one argument");
    std::vector<Value> more = rt.iterate(a.pos[0]);
    rt.check_items(items.size() + more.size());
    for (auto& v : more) self.list->append(std::move(v));
    return Value::none();
  }
  if (name == "pop") {
    if (items.empty()) rt.fail("pop from empty list");
    int64_t i = a.pos.empty() ? -1 : a.pos[0].as_int();
    if (i < 0) i += int64_t(items.size());
    if (i < 0 || i >= int64_t(items.size())) rt.fail("pop index out of range");
    Value v = items[size_t(i)];
    items.erase(items.begin() + i);
    return v;
  }
  if (name == "insert") {
    if (a.pos.size() != 2) rt.fail("insert expected 2 arguments");
    int64_t i = a.pos[0].as_int(), n = int64_t(items.size());
    if (i < 0) i = std::max<int64_t>(0, i + n);
    i = std::min(i, n);
    rt.check_items(items.size() + 1);
    self.list->append(a.pos[1]);
    std::rotate(items.begin() + i, items.end() - 1, items.end());
    return Value::none();
  }
  if (name == "index" || name == "count") {
    if (a.pos.empty()) rt.fail(name + "() takes at least 1 argument");
    int64_t n = 0;
    for (size_t k = 0; k < items.size(); ++k) {
      if (!equals(items[k], a.pos[0])) continue;
      if (name == "index") return Value::integer(int64_t(k));
      ++n;
    }
    if (name == "index") rt.fail(to_repr(a.pos[0]) + " is not in list");
    return Value::integer(n);
  }
  rt.fail("'list' object has no attribute '" + name + "'");
}

Value dict_method(Runtime& rt, const Value& self, const std::string& name, CallArgs& a) {
  auto& items = self.dict->items;
  if (name == "items" || name == "keys" || name == "values") {
    std::vector<Value> out;
    out.reserve(items.size());
    for (const auto& [k, v] : items)
      out.push_back(name == "keys" ? k : name == "values" ? v : Value::new_list({k, v}, true));
    return Value::new_list(std::move(out));
  }
  if (name == "get") {
    if (a.pos.empty()) rt.fail("get expected at least 1 argument");
    if (Value* v = self.dict->find(a.pos[0])) return *v;
    return a.pos.size() > 1 ? a.pos[1] : Value::none();
  }
  rt.fail("'dict' object has no attribute '" + name + "'");
}

bool is_string_method(const std::string& n) {
  static const char* names[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith",
                                "endswith", "replace", "upper", "lower", "title", "capitalize", "swapcase",
                                "find", "rfind", "index", "rindex", "count", "join", "format", "removeprefix",
                                "removesuffix", "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper"};
  return std::find(std::begin(names), std::end(names), n) != std::end(names);
}

}  // namespace

Value bound_method(Runtime&, const Value& self, const std::string& name) {
  if (self.is_string()) {
    if (!is_string_method(name)) return Value::undefined();
    std::string s = self.s;
    return Value::function("str." + name, [s, name](Runtime& rt, CallArgs& a) { return string_method(rt, s, name, a); });
  }
  if (self.is_list()) {
    static const char* names[] = {"append", "extend", "pop", "insert", "index", "count"};
    if (std::find(std::begin(names), std::end(names), name) == std::end(names)) return Value::undefined();
    return Value::function("list." + name, [self, name](Runtime& rt, CallArgs& a) { return list_method(rt, self, name, a); });
  }
  if (self.is_dict()) {
    if (name != "items" && name != "keys" && name != "values" && name != "get") return Value::undefined();
    return Value::function("dict." + name, [self, name](Runtime& rt, CallArgs& a) { return dict_method(rt, self, name, a); });
  }
  return Value::undefined();
}

}  // namespace fs::jinja

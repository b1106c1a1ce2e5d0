#include "text/jinja/runtime.h"

#include <algorithm>
#include <optional>

#include "text/jinja/error.h"
#include "text/jinja/pystr.h"

namespace fs::jinja {

Runtime::Runtime(const Limits& l, std::shared_ptr<Frame> g) : limits(l), frame(g), globals(std::move(g)) {}

Runtime::Enter::Enter(Runtime& r) : rt(r) {
  if (++rt.depth > rt.limits.max_depth) {
    --rt.depth;
    rt.fail("template recursion too deep (limit " + std::to_string(rt.limits.max_depth) + ")");
  }
}

std::shared_ptr<Frame> Runtime::child_frame() const {
  auto f = std::make_shared<Frame>();
  f->parent = frame;
  return f;
}

std::string Runtime::render(const Body& body) {
  std::string out;
  exec(body, out);
  return out;
}

void Runtime::step(uint64_t n) {
  steps_ += n;
  if (steps_ > limits.max_steps)
    fail("template exceeded its step limit (" + std::to_string(limits.max_steps) + " steps)");
}

void Runtime::check_size(size_t bytes) const {
  if (bytes > limits.max_output)
    fail("template produced a string larger than the limit (" + std::to_string(limits.max_output) + " bytes)");
}

void Runtime::check_items(size_t items) const {
  if (items > limits.max_items)
    fail("template built a container larger than the limit (" + std::to_string(limits.max_items) + " items)");
}

void Runtime::emit(std::string& out, std::string_view text) {
  emitted_ += text.size();
  if (emitted_ > limits.max_output)
    fail("template output exceeded the limit (" + std::to_string(limits.max_output) + " bytes)");
  out.append(text);
}

void Runtime::fail(const std::string& message) const {
  throw TemplateError("template error at line " + std::to_string(line) + ": " + message);
}

void Runtime::undefined_error(const Value& v) const { fail(v.s.empty() ? "value is undefined" : v.s); }

Value Runtime::lookup(const std::string& name) const {
  for (Frame* f = frame.get(); f; f = f->parent.get())
    if (Value* v = f->vars.find(name)) return *v;
  return Value::undefined("'" + name + "' is undefined");
}

static std::string object_desc(const Value& v) {
  if (v.kind == Kind::None) return "None";
  return type_name(v) + " object";
}

// loop.* computed from the loop's position (obj.i) and its items (obj.list).
static Value loop_attr(const Value& loop, const std::string& name) {
  const int64_t i = loop.i, n = int64_t(loop.list->items.size());
  if (name == "index") return Value::integer(i + 1);
  if (name == "index0") return Value::integer(i);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(1);
  if (name == "depth0") return Value::integer(0);
  if (name == "previtem") return i > 0 ? loop.list->items[size_t(i - 1)] : Value::undefined("there is no previous item");
  if (name == "nextitem") return i + 1 < n ? loop.list->items[size_t(i + 1)] : Value::undefined("there is no next item");
  if (name == "cycle")
    return Value::function("cycle", [i](Runtime& rt, CallArgs& args) -> Value {
      if (args.pos.empty()) rt.fail("no items for cycling given");
      return args.pos[size_t(i) % args.pos.size()];
    });
  return Value::undefined("'LoopContext' has no attribute '" + name + "'");
}

Value Runtime::get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Kind::Undefined: undefined_error(obj);
    case Kind::Dict: {
      Value m = bound_method(*this, obj, name);
      if (!m.is_undefined()) return m;
      if (Value* v = obj.dict->find(std::string_view(name))) return *v;
      break;
    }
    case Kind::Namespace:
      if (Value* v = obj.dict->find(std::string_view(name))) return *v;
      break;
    case Kind::Loop: return loop_attr(obj, name);
    case Kind::String: case Kind::List: {
      Value m = bound_method(*this, obj, name);
      if (!m.is_undefined()) return m;
      break;
    }
    default: break;
  }
  return Value::undefined("'" + object_desc(obj) + "' has no attribute '" + name + "'");
}

// Python's index normalisation; false when out of range.
static bool normalize_index(int64_t& i, size_t n) {
  if (i < 0) i += int64_t(n);
  return i >= 0 && i < int64_t(n);
}

static bool is_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

Value Runtime::get_item(const Value& obj, const Value& key) {
  auto missing = [&] { return Value::undefined("'" + object_desc(obj) + "' has no element " + to_repr(key)); };
  switch (obj.kind) {
    case Kind::Undefined: undefined_error(obj);
    case Kind::Dict:
      if (Value* v = obj.dict->find(key)) return *v;
      if (key.is_string()) return get_attr(obj, key.s);
      return missing();
    case Kind::Namespace: case Kind::Loop:
      if (key.is_string()) return get_attr(obj, key.s);
      return missing();
    case Kind::List:
      if (key.is_integral()) {
        int64_t i = key.as_int();
        if (normalize_index(i, obj.list->items.size())) return obj.list->items[size_t(i)];
        return missing();
      }
      if (key.is_string()) return get_attr(obj, key.s);
      return missing();
    case Kind::String:
      if (key.is_integral()) {
        int64_t i = key.as_int();
        if (is_ascii(obj.s)) {
          if (normalize_index(i, obj.s.size())) return Value::string(std::string(1, obj.s[size_t(i)]));
          return missing();
        }
        std::u32string cps = utf8_decode(obj.s);
        if (normalize_index(i, cps.size())) return Value::string(utf8_encode(cps.substr(size_t(i), 1)));
        return missing();
      }
      if (key.is_string()) return get_attr(obj, key.s);
      return missing();
    default:
      return missing();
  }
}

Value Runtime::slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) undefined_error(obj);
  auto as_index = [&](const Value& v) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_integral()) fail("slice indices must be integers or None");
    return v.as_int();
  };
  std::optional<int64_t> a = as_index(start_v), b = as_index(stop_v), st = as_index(step_v);
  int64_t step_n = st.value_or(1);
  if (step_n == 0) fail("slice step cannot be zero");
  auto pick = [&](int64_t n, std::vector<size_t>& idx) {
    auto clamp = [&](std::optional<int64_t> v, int64_t def) {
      if (!v) return def;
      int64_t x = *v;
      if (x < 0) x += n;
      if (step_n > 0) return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    int64_t lo = clamp(a, step_n > 0 ? 0 : n - 1), hi = clamp(b, step_n > 0 ? n : -1);
    for (int64_t i = lo; step_n > 0 ? i < hi : i > hi; i += step_n) idx.push_back(size_t(i));
  };
  std::vector<size_t> idx;
  if (obj.kind == Kind::List) {
    pick(int64_t(obj.list->items.size()), idx);
    std::vector<Value> items;
    items.reserve(idx.size());
    for (size_t i : idx) items.push_back(obj.list->items[i]);
    step(items.size());
    return Value::new_list(std::move(items), obj.list->tuple);
  }
  if (obj.kind == Kind::String) {
    std::u32string cps = utf8_decode(obj.s);
    pick(int64_t(cps.size()), idx);
    std::u32string out;
    for (size_t i : idx) out.push_back(cps[i]);
    step(out.size() / 64);
    return Value::string(utf8_encode(out));
  }
  fail("'" + type_name(obj) + "' object is not subscriptable");
}

Value Runtime::call(const Value& callee, CallArgs& args) {
  if (callee.kind == Kind::Function) return callee.fn->fn(*this, args);
  if (callee.is_undefined()) undefined_error(callee);
  fail("'" + type_name(callee) + "' object is not callable");
}

std::vector<Value> Runtime::iterate(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return {};
    case Kind::List: return v.list->items;
    case Kind::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.dict->items.size());
      for (const auto& [k, val] : v.dict->items) keys.push_back(k);
      return keys;
    }
    case Kind::String: {
      std::vector<Value> chars;
      std::string ch;
      for (char32_t c : utf8_decode(v.s)) {
        ch.clear();
        utf8_append(ch, c);
        chars.push_back(Value::string(ch));
      }
      return chars;
    }
    default: fail("'" + type_name(v) + "' object is not iterable");
  }
}

}  // namespace fs::jinja

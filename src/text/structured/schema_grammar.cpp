#include "text/structured/schema_grammar.h"

#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "text/structured/number_grammar.h"
#include "text/structured/regex_grammar.h"

namespace fs::structured {

namespace {

using json = nlohmann::ordered_json;

const std::set<std::string> kAnnotations = {"title",      "description", "$schema",    "$id",      "$comment",
                                            "default",    "examples",    "deprecated", "readOnly", "writeOnly",
                                            "$defs",      "definitions"};
const std::set<std::string> kHandled = {"type",      "enum",     "const",       "properties",       "required",
                                        "additionalProperties",  "items",       "minItems",         "maxItems",
                                        "pattern",   "format",   "minLength",   "maxLength",        "minimum",
                                        "maximum",   "exclusiveMinimum",        "exclusiveMaximum", "anyOf",
                                        "oneOf",     "allOf",    "$ref",        "uniqueItems"};

// RFC 3339 forms whose every match also passes full calendar checks (days 01-28).
const std::map<std::string, std::string> kFormats = {
    {"date-time",
     R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|1\d|2[0-8])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
    {"date", R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|1\d|2[0-8]))"},
    {"time", R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
    {"uuid", R"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"},
};

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const json& root, const SchemaLimits& limits)
      : b_(b), root_(root), limits_(limits), ws_(json_space(b)), char_(json_string_char(b)) {}

  Seq value(const json& s, int depth, const std::string& at) {
    if (depth > limits_.max_depth)
      throw Error("the schema nests deeper than " + std::to_string(limits_.max_depth) + " levels (at " + at + ")");
    if (b_.rule_count() > limits_.max_rules) throw Error("the schema is too large (more than " +
                                                         std::to_string(limits_.max_rules) + " grammar rules)");
    if (s.is_boolean()) {
      if (s.get<bool>()) return {any_value()};
      throw Error("the schema at " + at + " is false: no value can satisfy it");
    }
    if (!s.is_object()) throw Error("the schema at " + at + " must be an object or a boolean");
    for (const auto& [k, v] : s.items()) {
      if (kAnnotations.count(k) || kHandled.count(k)) continue;
      throw Error("unsupported JSON Schema keyword '" + k + "' at " + at);
    }
    if (s.contains("uniqueItems") && s["uniqueItems"] != false)
      throw Error("unsupported JSON Schema keyword 'uniqueItems' at " + at);
    if (s.contains("$ref")) return {ref(s["$ref"], depth, at)};
    if (s.contains("const")) return b_.literal(s["const"].dump());
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) throw Error("'enum' at " + at + " must be a non-empty list");
      std::vector<Seq> alts;
      for (const auto& v : s["enum"]) alts.push_back(b_.literal(v.dump()));
      return {b_.any_of(std::move(alts))};
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      if (!s.contains(key)) continue;
      const json& list = s[key];
      if (!list.is_array() || list.empty()) throw Error(std::string("'") + key + "' at " + at + " must be a non-empty list");
      if (std::string(key) == "allOf" && list.size() != 1)
        throw Error("'allOf' with more than one schema is not supported (at " + at + ")");
      std::vector<Seq> alts;
      for (size_t i = 0; i < list.size(); ++i)
        alts.push_back(value(list[i], depth + 1, at + "/" + key + "/" + std::to_string(i)));
      return {b_.any_of(std::move(alts))};
    }
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) return typed(s, t.get<std::string>(), depth, at);
      if (!t.is_array() || t.empty()) throw Error("'type' at " + at + " must be a string or a non-empty list");
      std::vector<Seq> alts;
      for (const auto& one : t) {
        if (!one.is_string()) throw Error("'type' at " + at + " must list type names");
        alts.push_back(typed(s, one.get<std::string>(), depth, at));
      }
      return {b_.any_of(std::move(alts))};
    }
    if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
      return typed(s, "object", depth, at);
    if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) return typed(s, "array", depth, at);
    if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength"))
      return typed(s, "string", depth, at);
    if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum"))
      return typed(s, "number", depth, at);
    return {any_value()};
  }

 private:
  Seq typed(const json& s, const std::string& type, int depth, const std::string& at) {
    if (type == "object") return object(s, depth, at);
    if (type == "array") return array(s, depth, at);
    if (type == "string") return string(s, at);
    if (type == "number" || type == "integer") return number(s, type == "integer", at);
    if (type == "boolean") return {b_.any_of({b_.literal("true"), b_.literal("false")})};
    if (type == "null") return b_.literal("null");
    throw Error("unknown type '" + type + "' at " + at);
  }

  Sym ref(const json& r, int depth, const std::string& at) {
    if (!r.is_string()) throw Error("'$ref' at " + at + " must be a string");
    const std::string path = r.get<std::string>();
    if (auto it = refs_.find(path); it != refs_.end()) return {true, it->second};
    if (path.rfind("#", 0) != 0) throw Error("only local '$ref's (#/...) are supported, not '" + path + "'");
    const json* target = &root_;
    try {
      if (path.size() > 1) target = &root_.at(json::json_pointer(path.substr(1)));
    } catch (const std::exception&) {
      throw Error("'$ref' '" + path + "' at " + at + " points at nothing");
    }
    const uint32_t rule = b_.new_rule();
    refs_[path] = rule;
    b_.add_alt(rule, value(*target, depth + 1, path));
    return {true, rule};
  }

  Seq string(const json& s, const std::string& at) {
    if (s.contains("pattern") || s.contains("format")) {
      std::string pattern;
      RegexOptions o;
      o.json_string = true;
      if (s.contains("pattern")) {
        if (!s["pattern"].is_string()) throw Error("'pattern' at " + at + " must be a string");
        pattern = s["pattern"].get<std::string>();
        o.search = true;
        if (s.contains("format")) throw Error("'pattern' together with 'format' is not supported (at " + at + ")");
      } else {
        const json& f = s["format"];
        auto it = f.is_string() ? kFormats.find(f.get<std::string>()) : kFormats.end();
        if (it == kFormats.end()) throw Error("unsupported string format " + f.dump() + " at " + at);
        pattern = it->second;
      }
      if (s.contains("minLength") || s.contains("maxLength"))
        throw Error("'minLength'/'maxLength' together with 'pattern' or 'format' is not supported (at " + at + ")");
      Seq out = b_.literal("\"");
      try {
        append(out, compile_regex(b_, pattern, o));
      } catch (const Error& e) {
        throw Error("'pattern' at " + at + ": " + e.what());
      }
      append(out, b_.literal("\""));
      return out;
    }
    const int min = count(s, "minLength", 0, at), max = count(s, "maxLength", -1, at);
    if (max >= 0 && max < min) throw Error("'maxLength' is below 'minLength' at " + at);
    if (max > 1000 || min > 1000) throw Error("string lengths above 1000 are not supported (at " + at + ")");
    Seq out = b_.literal("\"");
    append(out, b_.repeat({char_}, min, max));
    append(out, b_.literal("\""));
    return out;
  }

  Seq number(const json& s, bool integer, const std::string& at) {
    const bool bounded = s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                         s.contains("exclusiveMaximum");
    if (!bounded) return json_number(b_, integer);
    auto bound = [&](const char* key) -> std::optional<double> {
      if (!s.contains(key)) return std::nullopt;
      if (!s[key].is_number()) throw Error(std::string("'") + key + "' at " + at + " must be a number");
      const double v = s[key].get<double>();
      if (std::fabs(v) > double(kOpenBound)) throw Error(std::string("'") + key + "' at " + at + " is out of range");
      return v;
    };
    int64_t lo = -kOpenBound, hi = kOpenBound;
    if (auto v = bound("minimum")) lo = std::max(lo, int64_t(std::ceil(*v)));
    if (auto v = bound("exclusiveMinimum")) lo = std::max(lo, int64_t(std::floor(*v)) + 1);
    if (auto v = bound("maximum")) hi = std::min(hi, int64_t(std::floor(*v)));
    if (auto v = bound("exclusiveMaximum")) hi = std::min(hi, int64_t(std::ceil(*v)) - 1);
    if (lo > hi) throw Error("the bounds at " + at + " leave no value this server can produce");
    return bounded_number(b_, lo, hi, !integer);
  }

  Seq object(const json& s, int depth, const std::string& at) {
    const json props = s.value("properties", json::object());
    if (!props.is_object()) throw Error("'properties' at " + at + " must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) throw Error("'required' at " + at + " must be a list");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) throw Error("'required' at " + at + " must list names");
        required.insert(r.get<std::string>());
      }
    }
    const json extra = s.value("additionalProperties", props.empty() ? json(true) : json(false));
    // Properties in schema order, then required names the schema does not describe (any value).
    std::vector<std::pair<std::string, Seq>> members;
    for (const auto& [name, sub] : props.items())
      members.emplace_back(name, value(sub, depth + 1, at + "/properties/" + name));
    for (const auto& name : required)
      if (!props.contains(name)) {
        if (extra == false) throw Error("'" + name + "' is required at " + at + " but no property allows it");
        members.emplace_back(name, extra == true ? Seq{any_value()} : value(extra, depth + 1, at + "/additionalProperties"));
      }
    // first[i] / rest[i]: members i.. with no member written yet / after a member (a comma comes first).
    std::optional<Seq> extra_value;
    if (extra != false) extra_value = extra == true ? Seq{any_value()} : value(extra, depth + 1, at + "/additionalProperties");
    Sym first = {}, rest = {};
    {
      uint32_t f = b_.new_rule(), r = b_.new_rule();
      b_.add_alt(f, {});
      b_.add_alt(r, {});
      if (extra_value) {
        Seq kv = {string_key()};
        append(kv, key_tail(*extra_value));
        Sym more = b_.star(comma_then(kv));
        Seq one = kv;
        one.push_back(more);
        b_.add_alt(f, one);
        b_.add_alt(r, {more});
      }
      first = {true, f};
      rest = {true, r};
    }
    for (size_t i = members.size(); i-- > 0;) {
      const auto& [name, val] = members[i];
      Seq kv = b_.literal(json(name).dump());
      append(kv, key_tail(val));
      Seq with_first = kv, with_rest = b_.literal(",");
      with_first.push_back(rest);
      with_rest.push_back(ws_);
      append(with_rest, kv);
      with_rest.push_back(rest);
      const bool must = required.count(name) > 0;
      uint32_t f = b_.new_rule(), r = b_.new_rule();
      b_.add_alt(f, with_first);
      b_.add_alt(r, with_rest);
      if (!must) {
        b_.add_alt(f, {first});
        b_.add_alt(r, {rest});
      }
      first = {true, f};
      rest = {true, r};
    }
    Seq out = b_.literal("{");
    out.push_back(ws_);
    out.push_back(first);
    append(out, b_.literal("}"));
    return out;
  }

  // ws ":" ws value ws
  Seq key_tail(const Seq& val) {
    Seq out{ws_};
    append(out, b_.literal(":"));
    out.push_back(ws_);
    append(out, val);
    out.push_back(ws_);
    return out;
  }

  Sym string_key() {
    Seq s = b_.literal("\"");
    s.push_back(b_.star({char_}));
    append(s, b_.literal("\""));
    return b_.any_of({s});
  }

  // A comma, optional whitespace, then `x`: the next member of a list.
  Seq comma_then(const Seq& x) {
    Seq out = b_.literal(",");
    out.push_back(ws_);
    append(out, x);
    return out;
  }

  Seq array(const json& s, int depth, const std::string& at) {
    const int min = count(s, "minItems", 0, at), max = count(s, "maxItems", -1, at);
    if (max >= 0 && max < min) throw Error("'maxItems' is below 'minItems' at " + at);
    if (min > 1000 || max > 1000) throw Error("item counts above 1000 are not supported (at " + at + ")");
    Seq item = s.contains("items") ? value(s["items"], depth + 1, at + "/items") : Seq{any_value()};
    item.push_back(ws_);
    Seq out = b_.literal("[");
    out.push_back(ws_);
    if (max != 0) {
      Seq items = item;
      append(items, b_.repeat(comma_then(item), std::max(min - 1, 0), max < 0 ? -1 : max - 1));
      if (min == 0) out.push_back(b_.optional(items));
      else append(out, items);
    }
    append(out, b_.literal("]"));
    return out;
  }

  int count(const json& s, const char* key, int fallback, const std::string& at) {
    if (!s.contains(key)) return fallback;
    if (!s[key].is_number_integer() || s[key].get<long long>() < 0)
      throw Error(std::string("'") + key + "' at " + at + " must be a non-negative integer");
    return int(std::min<long long>(s[key].get<long long>(), 1 << 20));
  }

  // Any JSON value (one recursive rule, built once).
  Sym any_value() {
    if (any_) return {true, *any_};
    const uint32_t v = b_.new_rule();
    any_ = v;
    const Sym val{true, v};
    Seq str = b_.literal("\"");
    str.push_back(b_.star({char_}));
    append(str, b_.literal("\""));
    Seq kv = str;
    append(kv, key_tail({val}));
    Seq members = kv;
    members.push_back(b_.star(comma_then(kv)));
    Seq obj = b_.literal("{");
    obj.push_back(ws_);
    obj.push_back(b_.optional(members));
    append(obj, b_.literal("}"));
    Seq item{val, ws_};
    Seq items = item;
    items.push_back(b_.star(comma_then(item)));
    Seq arr = b_.literal("[");
    arr.push_back(ws_);
    arr.push_back(b_.optional(items));
    append(arr, b_.literal("]"));
    b_.add_alt(v, obj);
    b_.add_alt(v, arr);
    b_.add_alt(v, str);
    b_.add_alt(v, json_number(b_, false));
    b_.add_alt(v, b_.literal("true"));
    b_.add_alt(v, b_.literal("false"));
    b_.add_alt(v, b_.literal("null"));
    return val;
  }

  GrammarBuilder& b_;
  const json& root_;
  SchemaLimits limits_;
  Sym ws_, char_;
  std::map<std::string, uint32_t> refs_;
  std::optional<uint32_t> any_;
};

}  // namespace

Sym json_space(GrammarBuilder& b) {
  ByteSet indent;
  indent.add(' ');
  indent.add('\t');
  Seq newline = b.literal("\n");
  append(newline, b.repeat({b.set(indent)}, 0, 16));
  return b.optional({b.any_of({b.literal(" "), newline})});
}

Seq compile_schema(GrammarBuilder& b, const json& schema, const SchemaLimits& limits) {
  return SchemaCompiler(b, schema, limits).value(schema, 0, "#");
}

}  // namespace fs::structured

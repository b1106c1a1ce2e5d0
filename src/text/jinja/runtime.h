#pragma once
// Renders a parsed template: variable scopes, limits, and the operations every value supports
// (attribute and item access, calls, iteration).
#include <memory>
#include <string>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/limits.h"
#include "text/jinja/value.h"

namespace fs::jinja {

// A scope's variables: few per scope, so a flat list beats a hash map.
class VarMap {
 public:
  Value& operator[](const std::string& name) {
    if (Value* v = find(name)) return *v;
    entries_.emplace_back(name, Value());
    return entries_.back().second;
  }
  Value* find(const std::string& name) {
    for (auto& [k, v] : entries_)
      if (k == name) return &v;
    return nullptr;
  }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

struct Frame {
  VarMap vars;
  std::shared_ptr<Frame> parent;
};

class Runtime {
 public:
  Runtime(const Limits& limits, std::shared_ptr<Frame> globals);

  // Renders a whole template body.
  std::string render(const Body& body);

  Value eval(const Expr& e);
  void exec(const Body& body, std::string& out);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v) { frame->vars[name] = std::move(v); }
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
  Value call(const Value& callee, CallArgs& args);
  // Elements of a list or tuple, a dict's keys, a string's characters; undefined → none.
  std::vector<Value> iterate(const Value& v);

  // Counts evaluation steps; throws past the limit.
  void step(uint64_t n = 1);
  // Throws when a string of `bytes` or a container of `items` would pass the limits.
  void check_size(size_t bytes) const;
  void check_items(size_t items) const;
  void emit(std::string& out, std::string_view text);
  [[noreturn]] void fail(const std::string& message) const;
  // Throws the error an undefined value carries when it is used.
  [[noreturn]] void undefined_error(const Value& v) const;

  const Limits limits;
  std::shared_ptr<Frame> frame;
  std::shared_ptr<Frame> globals;
  int line = 0;
  int depth = 0;

  // Nesting guard for recursive evaluation.
  struct Enter {
    Runtime& rt;
    explicit Enter(Runtime& r);
    ~Enter() { --rt.depth; }
  };
  // Makes `f` the current frame until destroyed.
  struct Scope {
    Runtime& rt;
    std::shared_ptr<Frame> saved;
    Scope(Runtime& r, std::shared_ptr<Frame> f) : rt(r), saved(std::move(r.frame)) { rt.frame = std::move(f); }
    ~Scope() { rt.frame = std::move(saved); }
  };
  std::shared_ptr<Frame> child_frame() const;

 private:
  enum class Flow { Normal, Break, Continue };
  Flow flow_ = Flow::Normal;
  uint64_t steps_ = 0;
  size_t emitted_ = 0;
  Value pending_subject_;  // the text a filter block or set block hands to its filters

  Value eval_binary(Op op, const Value& a, const Value& b);
  Value eval_filter(const Expr& e);
  Value eval_call(const Expr& e, const Value* caller);
  bool compare(Op op, const Value& a, const Value& b);
  void exec_stmt(const Stmt& s, std::string& out);
  void exec_for(const Stmt& s, std::string& out);
  void exec_set(const Stmt& s, Value value);
  Value make_macro(const Stmt& s, const std::vector<Param>& params, const Body& body, const std::string& name);
};

// Filters, tests and methods (filters.cpp, tests.cpp, methods.cpp).
Value apply_filter(Runtime& rt, const std::string& name, Value subject, CallArgs& args);
bool filter_exists(const std::string& name);
bool apply_test(Runtime& rt, const std::string& name, const Value& subject, CallArgs& args);
// The bound method `name` of a str, list or dict, or undefined when it has none.
Value bound_method(Runtime& rt, const Value& self, const std::string& name);
// The functions every template sees: range, namespace, dict, raise_exception, strftime_now.
void add_builtins(Frame& globals);
// str.replace with Python's rules (an empty `old` inserts between characters); count < 0: all.
std::string replace_text(Runtime& rt, const std::string& s, const std::string& old, const std::string& repl,
                         int64_t count);
// Python's `%` on a string.
std::string percent_format(Runtime& rt, const std::string& fmt, const Value& args);

}  // namespace fs::jinja

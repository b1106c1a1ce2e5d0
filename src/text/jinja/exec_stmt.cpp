// Statement execution: output, if, for (with loop.*), set, macros, call/filter/with blocks.
#include "text/jinja/error.h"
#include "text/jinja/runtime.h"

namespace fs::jinja {

void Runtime::exec(const Body& body, std::string& out) {
  for (const auto& s : body) {
    exec_stmt(*s, out);
    if (flow_ != Flow::Normal) return;
  }
}

void Runtime::exec_set(const Stmt& s, Value value) {
  if (s.attr_target) {
    Value ns = lookup(s.targets[0]);
    if (ns.kind != Kind::Namespace) fail("cannot assign attribute on non-namespace object");
    ns.dict->set(Value::string(s.targets[1]), std::move(value));
    return;
  }
  if (s.targets.size() == 1) {
    assign(s.targets[0], std::move(value));
    return;
  }
  std::vector<Value> items = iterate(value);
  if (items.size() != s.targets.size())
    fail("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(s.targets.size()));
  for (size_t k = 0; k < items.size(); ++k) assign(s.targets[k], std::move(items[k]));
}

void Runtime::exec_stmt(const Stmt& s, std::string& out) {
  Enter guard(*this);
  step();
  line = s.line;
  switch (s.type) {
    case StmtType::Data: emit(out, s.text); return;
    case StmtType::Output: {
      Value v = eval(*s.expr);
      if (v.is_string()) emit(out, v.s);
      else emit(out, to_str(v));
      return;
    }
    case StmtType::If:
      for (const auto& [cond, body] : s.branches) {
        if (truthy(eval(*cond))) {
          exec(body, out);
          return;
        }
      }
      exec(s.else_body, out);
      return;
    case StmtType::For: exec_for(s, out); return;
    case StmtType::Set: exec_set(s, eval(*s.expr)); return;
    case StmtType::SetBlock: {
      std::string text;
      {
        Scope scope(*this, child_frame());
        exec(s.body, text);
      }
      Value v = Value::string(std::move(text));
      if (s.expr) {
        pending_subject_ = std::move(v);
        v = eval(*s.expr);
        pending_subject_ = Value();
      }
      exec_set(s, std::move(v));
      return;
    }
    case StmtType::Macro: assign(s.text, make_macro(s, s.params, s.body, s.text)); return;
    case StmtType::CallBlock: {
      Value caller = make_macro(s, s.params, s.body, "caller");
      Value r = eval_call(*s.expr, &caller);
      emit(out, to_str(r));
      return;
    }
    case StmtType::FilterBlock: {
      std::string text;
      {
        Scope scope(*this, child_frame());
        exec(s.body, text);
      }
      pending_subject_ = Value::string(std::move(text));
      Value v = eval(*s.expr);
      pending_subject_ = Value();
      emit(out, to_str(v));
      return;
    }
    case StmtType::With: {
      auto f = child_frame();
      for (const auto& p : s.params) f->vars[p.name] = eval(*p.default_value);
      Scope scope(*this, f);
      exec(s.body, out);
      return;
    }
    case StmtType::Break: flow_ = Flow::Break; return;
    case StmtType::Continue: flow_ = Flow::Continue; return;
    case StmtType::Sequence: exec(s.body, out); return;
  }
}

void Runtime::exec_for(const Stmt& s, std::string& out) {
  Value iterable = eval(*s.expr);
  if (iterable.is_none()) fail("'NoneType' object is not iterable");
  std::vector<Value> items = iterate(iterable);
  auto bind = [&](Frame& f, const Value& item) {
    if (s.targets.size() == 1) {
      f.vars[s.targets[0]] = item;
      return;
    }
    std::vector<Value> parts = iterate(item);
    if (parts.size() != s.targets.size())
      fail("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(s.targets.size()));
    for (size_t k = 0; k < parts.size(); ++k) f.vars[s.targets[k]] = parts[k];
  };
  if (s.cond) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      auto f = child_frame();
      bind(*f, item);
      Scope scope(*this, f);
      if (truthy(eval(*s.cond))) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec(s.else_body, out);
    return;
  }
  const int64_t n = int64_t(items.size());
  auto shared_items = std::make_shared<ListData>();
  shared_items->items = std::move(items);
  for (int64_t i = 0; i < n; ++i) {
    step();
    auto f = child_frame();
    bind(*f, shared_items->items[size_t(i)]);
    Value loop;
    loop.kind = Kind::Loop;
    loop.i = i;
    loop.list = shared_items;
    f->vars["loop"] = std::move(loop);
    {
      Scope scope(*this, f);
      exec(s.body, out);
    }
    if (flow_ == Flow::Break) {
      flow_ = Flow::Normal;
      break;
    }
    flow_ = Flow::Normal;
  }
}

Value Runtime::make_macro(const Stmt& s, const std::vector<Param>& params, const Body& body,
                          const std::string& name) {
  std::weak_ptr<Frame> closure = frame;
  const Stmt* where = &s;
  const std::vector<Param>* ps = &params;
  const Body* b = &body;
  return Value::function(name, [closure, where, ps, b, name](Runtime& rt, CallArgs& args) -> Value {
    Enter guard(rt);
    auto f = std::make_shared<Frame>();
    f->parent = closure.lock();
    if (!f->parent) f->parent = rt.globals;
    size_t npos = std::min(args.pos.size(), ps->size());
    std::vector<bool> bound(ps->size(), false);
    for (size_t k = 0; k < npos; ++k) {
      f->vars[(*ps)[k].name] = args.pos[k];
      bound[k] = true;
    }
    std::vector<Value> extra(args.pos.begin() + long(npos), args.pos.end());
    Value kwargs = Value::new_dict();
    for (auto& [key, v] : args.kw) {
      bool matched = false;
      for (size_t k = 0; k < ps->size(); ++k) {
        if ((*ps)[k].name != key) continue;
        if (bound[k]) rt.fail("macro '" + name + "' got multiple values for argument '" + key + "'");
        f->vars[key] = v;
        bound[k] = matched = true;
      }
      if (!matched) {
        if (key == "caller") f->vars["caller"] = v;
        else kwargs.dict->set(Value::string(key), v);
      }
    }
    f->vars["varargs"] = Value::new_list(std::move(extra), true);
    f->vars["kwargs"] = kwargs;
    Scope scope(rt, f);
    for (size_t k = 0; k < ps->size(); ++k) {
      if (bound[k]) continue;
      const Param& p = (*ps)[k];
      f->vars[p.name] = p.default_value ? rt.eval(*p.default_value)
                                        : Value::undefined("parameter '" + p.name + "' was not provided");
    }
    std::string out;
    rt.line = where->line;
    rt.exec(*b, out);
    rt.flow_ = Flow::Normal;
    return Value::string(std::move(out));
  });
}

}  // namespace fs::jinja

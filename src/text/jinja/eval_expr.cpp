// Expression evaluation: literals, names, operators with Python semantics, calls, filters and tests.
#include <cmath>

#include "text/jinja/error.h"
#include "text/jinja/pystr.h"
#include "text/jinja/runtime.h"

namespace fs::jinja {
namespace {

template <class F>
int64_t checked(Runtime& rt, F op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op(x, y, &r)) rt.fail("integer overflow");
  return r;
}
bool add_op(int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); }
bool sub_op(int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); }
bool mul_op(int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }

int64_t floor_div(Runtime& rt, int64_t a, int64_t b) {
  if (b == 0) rt.fail("integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) rt.fail("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(Runtime& rt, int64_t a, int64_t b) {
  if (b == 0) rt.fail("integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double float_mod(Runtime& rt, double a, double b) {
  if (b == 0) rt.fail("float modulo");
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  if (r == 0) r = std::copysign(0.0, b);
  return r;
}

Value repeat(Runtime& rt, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  // An empty sequence stays empty however large n is (no loop of n empty appends).
  if (seq.is_string() ? seq.s.empty() : seq.list->items.empty()) n = 0;
  if (seq.is_string()) {
    if (!seq.s.empty() && uint64_t(n) > rt.limits.max_output / seq.s.size() + 1) rt.check_size(SIZE_MAX);
    rt.check_size(seq.s.size() * size_t(n));
    rt.step(seq.s.size() * size_t(n) / 64);
    std::string out;
    out.reserve(seq.s.size() * size_t(n));
    for (int64_t k = 0; k < n; ++k) out += seq.s;
    return Value::string(std::move(out));
  }
  size_t len = seq.list->items.size();
  if (len && uint64_t(n) > rt.limits.max_items / len + 1) rt.check_items(SIZE_MAX);
  rt.check_items(len * size_t(n));
  rt.step(len * size_t(n));
  std::vector<Value> items;
  for (int64_t k = 0; k < n; ++k) items.insert(items.end(), seq.list->items.begin(), seq.list->items.end());
  return Value::new_list(std::move(items), seq.list->tuple);
}

const char* op_symbol(Op op) {
  switch (op) {
    case Op::Add: return "+";
    case Op::Sub: return "-";
    case Op::Mul: return "*";
    case Op::Div: return "/";
    case Op::FloorDiv: return "//";
    case Op::Mod: return "%";
    case Op::Pow: return "**";
    default: return "?";
  }
}

}  // namespace

Value Runtime::eval_binary(Op op, const Value& a, const Value& b) {
  if (op == Op::Concat) {
    std::string out = to_str(a) + to_str(b);
    check_size(out.size());
    step(out.size() / 256);
    return Value::string(std::move(out));
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (a.is_numeric() && b.is_numeric()) {
    bool ints = a.is_integral() && b.is_integral();
    int64_t x = a.as_int(), y = b.as_int();
    double fx = a.as_double(), fy = b.as_double();
    switch (op) {
      case Op::Add:
        if (ints) return Value::integer(checked(*this, add_op, x, y));
        return Value::number(fx + fy);
      case Op::Sub:
        if (ints) return Value::integer(checked(*this, sub_op, x, y));
        return Value::number(fx - fy);
      case Op::Mul:
        if (ints) return Value::integer(checked(*this, mul_op, x, y));
        return Value::number(fx * fy);
      case Op::Div:
        if (fy == 0) fail("division by zero");
        return Value::number(fx / fy);
      case Op::FloorDiv:
        if (ints) return Value::integer(floor_div(*this, x, y));
        if (fy == 0) fail("float floor division by zero");
        return Value::number(std::floor(fx / fy));
      case Op::Mod:
        if (ints) return Value::integer(py_mod(*this, x, y));
        return Value::number(float_mod(*this, fx, fy));
      case Op::Pow:
        if (ints && y >= 0) {
          int64_t result = 1, base = x;
          for (int64_t e = y; e > 0; e >>= 1) {
            if (e & 1) result = checked(*this, mul_op, result, base);
            if (e > 1) base = checked(*this, mul_op, base, base);
          }
          return Value::integer(result);
        }
        if (fx == 0 && fy < 0) fail("0.0 cannot be raised to a negative power");
        return Value::number(std::pow(fx, fy));
      default: break;
    }
  }
  if (op == Op::Add) {
    if (a.is_string() && b.is_string()) {
      check_size(a.s.size() + b.s.size());
      step((a.s.size() + b.s.size()) / 256);
      return Value::string(a.s + b.s);
    }
    if (a.is_list() && b.is_list() && a.list->tuple == b.list->tuple) {
      check_items(a.list->items.size() + b.list->items.size());
      step(a.list->items.size() + b.list->items.size());
      std::vector<Value> items = a.list->items;
      items.insert(items.end(), b.list->items.begin(), b.list->items.end());
      return Value::new_list(std::move(items), a.list->tuple);
    }
  }
  if (op == Op::Mul) {
    if ((a.is_string() || a.is_list()) && b.is_integral()) return repeat(*this, a, b.as_int());
    if ((b.is_string() || b.is_list()) && a.is_integral()) return repeat(*this, b, a.as_int());
  }
  if (op == Op::Mod && a.is_string()) return Value::string(percent_format(*this, a.s, b));
  fail(std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + type_name(a) + "' and '" +
       type_name(b) + "'");
}

bool Runtime::compare(Op op, const Value& a, const Value& b) {
  switch (op) {
    case Op::Eq: return equals(a, b);
    case Op::Ne: return !equals(a, b);
    case Op::Lt: return less_than(a, b);
    case Op::Gt: return less_than(b, a);
    case Op::Le: return less_than(a, b) || equals(a, b);
    case Op::Ge: return less_than(b, a) || equals(a, b);
    case Op::In: case Op::NotIn: {
      bool found = false;
      if (b.is_string()) {
        if (!a.is_string()) fail("'in <string>' requires string as left operand, not " + type_name(a));
        found = b.s.find(a.s) != std::string::npos;
      } else if (b.is_list()) {
        for (const Value& v : b.list->items)
          if (equals(a, v)) {
            found = true;
            break;
          }
      } else if (b.is_dict()) {
        found = b.dict->find(a) != nullptr;
      } else if (!b.is_undefined()) {
        fail("argument of type '" + type_name(b) + "' is not iterable");
      }
      return op == Op::In ? found : !found;
    }
    default: return false;
  }
}

Value Runtime::eval(const Expr& e) {
  Enter guard(*this);
  step();
  line = e.line;
  switch (e.type) {
    case ExprType::Literal: return e.literal;
    case ExprType::Name: return lookup(e.name);
    case ExprType::List: case ExprType::Tuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a));
      return Value::new_list(std::move(items), e.type == ExprType::Tuple);
    }
    case ExprType::Dict: {
      Value d = Value::new_dict();
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        Value key = eval(*e.args[k]);
        if (key.kind == Kind::List && !key.list->tuple) fail("unhashable type: 'list'");
        if (key.kind == Kind::Dict) fail("unhashable type: 'dict'");
        d.dict->set(key, eval(*e.args[k + 1]));
      }
      return d;
    }
    case ExprType::GetAttr: return get_attr(eval(*e.args[0]), e.name);
    case ExprType::GetItem: {
      Value obj = eval(*e.args[0]);
      return get_item(obj, eval(*e.args[1]));
    }
    case ExprType::Slice: {
      Value obj = eval(*e.args[0]);
      Value parts[3];
      for (int k = 0; k < 3; ++k) parts[k] = e.args[k + 1] ? eval(*e.args[k + 1]) : Value::none();
      return slice(obj, parts[0], parts[1], parts[2]);
    }
    case ExprType::Call: return eval_call(e, nullptr);
    case ExprType::Filter: return eval_filter(e);
    case ExprType::Test: {
      Value subject = eval(*e.args[0]);
      CallArgs args;
      for (size_t k = 1; k < e.args.size(); ++k) args.pos.push_back(eval(*e.args[k]));
      for (const auto& [name, x] : e.kwargs) args.kw.emplace_back(name, eval(*x));
      line = e.line;
      bool r = apply_test(*this, e.name, subject, args);
      return Value::boolean(e.negated ? !r : r);
    }
    case ExprType::Unary: {
      Value v = eval(*e.args[0]);
      if (e.op == Op::Not) return Value::boolean(!truthy(v));
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_numeric()) fail("bad operand type for unary " + std::string(e.op == Op::Neg ? "-" : "+") + ": '" +
                                type_name(v) + "'");
      if (e.op == Op::Pos) return v.kind == Kind::Bool ? Value::integer(v.as_int()) : v;
      if (v.kind == Kind::Float) return Value::number(-v.f);
      if (v.as_int() == INT64_MIN) fail("integer overflow");
      return Value::integer(-v.as_int());
    }
    case ExprType::Binary: {
      Value a = eval(*e.args[0]);
      Value b = eval(*e.args[1]);
      line = e.line;
      return eval_binary(e.op, a, b);
    }
    case ExprType::Compare: {
      Value left = eval(*e.args[0]);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value right = eval(*e.args[k + 1]);
        line = e.line;
        if (!compare(e.ops[k], left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprType::And: {
      Value a = eval(*e.args[0]);
      return truthy(a) ? eval(*e.args[1]) : a;
    }
    case ExprType::Or: {
      Value a = eval(*e.args[0]);
      return truthy(a) ? a : eval(*e.args[1]);
    }
    case ExprType::Cond: {
      if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
      return e.args[2] ? eval(*e.args[2]) : Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
    }
  }
  return Value::undefined();
}

Value Runtime::eval_call(const Expr& e, const Value* caller) {
  Value callee = eval(*e.args[0]);
  CallArgs args;
  for (size_t k = 1; k < e.args.size(); ++k) args.pos.push_back(eval(*e.args[k]));
  for (const auto& [name, x] : e.kwargs) args.kw.emplace_back(name, eval(*x));
  if (caller) args.kw.emplace_back("caller", *caller);
  line = e.line;
  return call(callee, args);
}

Value Runtime::eval_filter(const Expr& e) {
  Value subject = e.args[0] ? eval(*e.args[0]) : pending_subject_;
  CallArgs args;
  for (size_t k = 1; k < e.args.size(); ++k) args.pos.push_back(eval(*e.args[k]));
  for (const auto& [name, x] : e.kwargs) args.kw.emplace_back(name, eval(*x));
  line = e.line;
  return apply_filter(*this, e.name, std::move(subject), args);
}

}  // namespace fs::jinja

#include "text/jinja/expression_parser.h"

#include <memory>

#include "text/jinja/error.h"

namespace fs::jinja {

namespace {
constexpr int kMaxParseDepth = 400;
}  // namespace

ExpressionParser::DepthGuard::DepthGuard(ExpressionParser& parser) : p(parser) {
  if (++p.depth_ > kMaxParseDepth) p.fail("template nested too deeply");
}

void ExpressionParser::fail(const std::string& msg) const {
  throw TemplateError("template syntax error at line " + std::to_string(cur().line) + ": " + msg);
}

std::string ExpressionParser::describe(const Token& t) {
  switch (t.type) {
    case Tok::Eof: return "end of template";
    case Tok::BlockEnd: return "end of statement block";
    case Tok::VarEnd: return "end of print statement";
    case Tok::Data: return "template data";
    case Tok::BlockBegin: return "begin of statement block";
    case Tok::VarBegin: return "begin of print statement";
    default: return "'" + t.text + "'";
  }
}

bool ExpressionParser::skip_op(const char* op) {
  if (!is_op(op)) return false;
  advance();
  return true;
}

bool ExpressionParser::skip_name(const char* name) {
  if (!is_name(name)) return false;
  advance();
  return true;
}

void ExpressionParser::expect_op(const char* op) {
  if (!skip_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
}

std::string ExpressionParser::expect_name() {
  if (cur().type != Tok::Name) fail("expected a name, got " + describe(cur()));
  std::string n = cur().text;
  advance();
  return n;
}

ExprPtr ExpressionParser::make(ExprType type, int line) {
  auto e = std::make_unique<Expr>();
  e->type = type;
  e->line = line;
  return e;
}

ExprPtr ExpressionParser::parse_tuple(bool with_condexpr) {
  int line = cur().line;
  ExprPtr first = parse_expression(with_condexpr);
  if (!is_op(",")) return first;
  auto t = make(ExprType::Tuple, line);
  t->args.push_back(std::move(first));
  while (skip_op(",")) {
    if (cur().type == Tok::BlockEnd || cur().type == Tok::VarEnd || is_op(")") || is_name("if")) break;
    t->args.push_back(parse_expression(with_condexpr));
  }
  return t;
}

ExprPtr ExpressionParser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr ExpressionParser::parse_condexpr() {
  int line = cur().line;
  ExprPtr e = parse_or();
  while (skip_name("if")) {
    auto c = make(ExprType::Cond, line);
    ExprPtr cond = parse_or();
    ExprPtr other = skip_name("else") ? parse_condexpr() : nullptr;
    c->args.push_back(std::move(e));
    c->args.push_back(std::move(cond));
    c->args.push_back(std::move(other));
    e = std::move(c);
  }
  return e;
}

ExprPtr ExpressionParser::binary(ExprType type, Op op, ExprPtr l, ExprPtr r, int line) {
  auto e = make(type, line);
  e->op = op;
  e->args.push_back(std::move(l));
  e->args.push_back(std::move(r));
  return e;
}

ExprPtr ExpressionParser::parse_or() {
  int line = cur().line;
  ExprPtr e = parse_and();
  while (skip_name("or")) e = binary(ExprType::Or, Op::None, std::move(e), parse_and(), line);
  return e;
}

ExprPtr ExpressionParser::parse_and() {
  int line = cur().line;
  ExprPtr e = parse_not();
  while (skip_name("and")) e = binary(ExprType::And, Op::None, std::move(e), parse_not(), line);
  return e;
}

ExprPtr ExpressionParser::parse_not() {
  DepthGuard guard(*this);
  int line = cur().line;
  if (skip_name("not")) {
    auto e = make(ExprType::Unary, line);
    e->op = Op::Not;
    e->args.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr ExpressionParser::parse_compare() {
  int line = cur().line;
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    Op op = Op::None;
    if (cur().type == Tok::Op) {
      const std::string& t = cur().text;
      op = t == "==" ? Op::Eq : t == "!=" ? Op::Ne : t == "<" ? Op::Lt : t == "<=" ? Op::Le
         : t == ">" ? Op::Gt : t == ">=" ? Op::Ge : Op::None;
      if (op != Op::None) advance();
    } else if (is_name("in")) {
      op = Op::In;
      advance();
    } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
      op = Op::NotIn;
      advance();
      advance();
    }
    if (op == Op::None) break;
    if (!cmp) {
      cmp = make(ExprType::Compare, line);
      cmp->args.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->args.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr ExpressionParser::parse_math1() {
  int line = cur().line;
  ExprPtr e = parse_concat();
  while (is_op("+") || is_op("-")) {
    Op op = cur().text == "+" ? Op::Add : Op::Sub;
    advance();
    e = binary(ExprType::Binary, op, std::move(e), parse_concat(), line);
  }
  return e;
}

ExprPtr ExpressionParser::parse_concat() {
  int line = cur().line;
  ExprPtr e = parse_math2();
  while (skip_op("~")) e = binary(ExprType::Binary, Op::Concat, std::move(e), parse_math2(), line);
  return e;
}

ExprPtr ExpressionParser::parse_math2() {
  int line = cur().line;
  ExprPtr e = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const std::string& t = cur().text;
    Op op = t == "*" ? Op::Mul : t == "/" ? Op::Div : t == "//" ? Op::FloorDiv : Op::Mod;
    advance();
    e = binary(ExprType::Binary, op, std::move(e), parse_pow(), line);
  }
  return e;
}

ExprPtr ExpressionParser::parse_pow() {
  int line = cur().line;
  ExprPtr e = parse_unary(true);
  while (skip_op("**")) e = binary(ExprType::Binary, Op::Pow, std::move(e), parse_unary(true), line);
  return e;
}

ExprPtr ExpressionParser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  int line = cur().line;
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    Op op = cur().text == "-" ? Op::Neg : Op::Pos;
    advance();
    node = make(ExprType::Unary, line);
    node->op = op;
    node->args.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr ExpressionParser::literal(Value v, int line) {
  auto e = make(ExprType::Literal, line);
  e->literal = std::move(v);
  return e;
}

ExprPtr ExpressionParser::parse_primary() {
  DepthGuard guard(*this);
  const Token& t = cur();
  int line = t.line;
  switch (t.type) {
    case Tok::Name: {
      std::string n = t.text;
      advance();
      if (n == "true" || n == "True") return literal(Value::boolean(true), line);
      if (n == "false" || n == "False") return literal(Value::boolean(false), line);
      if (n == "none" || n == "None") return literal(Value::none(), line);
      auto e = make(ExprType::Name, line);
      e->name = n;
      return e;
    }
    case Tok::String: {
      std::string s;
      while (cur().type == Tok::String) {
        s += cur().text;
        advance();
      }
      return literal(Value::string(std::move(s)), line);
    }
    case Tok::Int: {
      int64_t v = t.ival;
      advance();
      return literal(Value::integer(v), line);
    }
    case Tok::Float: {
      double v = t.fval;
      advance();
      return literal(Value::number(v), line);
    }
    default: break;
  }
  if (skip_op("(")) {
    if (skip_op(")")) return make(ExprType::Tuple, line);
    ExprPtr first = parse_expression(true);
    if (skip_op(")")) return first;
    auto tup = make(ExprType::Tuple, line);
    tup->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (is_op(")")) break;
      tup->args.push_back(parse_expression(true));
    }
    expect_op(")");
    return tup;
  }
  if (skip_op("[")) {
    auto list = make(ExprType::List, line);
    while (!is_op("]")) {
      if (!list->args.empty()) expect_op(",");
      if (is_op("]")) break;
      list->args.push_back(parse_expression(true));
    }
    advance();
    return list;
  }
  if (skip_op("{")) {
    auto dict = make(ExprType::Dict, line);
    while (!is_op("}")) {
      if (!dict->args.empty()) expect_op(",");
      if (is_op("}")) break;
      dict->args.push_back(parse_expression(true));
      expect_op(":");
      dict->args.push_back(parse_expression(true));
    }
    advance();
    return dict;
  }
  fail("unexpected " + describe(t));
}

ExprPtr ExpressionParser::parse_postfix(ExprPtr node) {
  while (true) {
    int line = cur().line;
    if (skip_op(".")) {
      if (cur().type == Tok::Name) {
        auto e = make(ExprType::GetAttr, line);
        e->name = cur().text;
        advance();
        e->args.push_back(std::move(node));
        node = std::move(e);
      } else if (cur().type == Tok::Int) {
        auto e = make(ExprType::GetItem, line);
        e->args.push_back(std::move(node));
        e->args.push_back(literal(Value::integer(cur().ival), line));
        advance();
        node = std::move(e);
      } else {
        fail("expected name or number after '.'");
      }
    } else if (skip_op("[")) {
      node = parse_subscript(std::move(node), line);
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_subscript(ExprPtr obj, int line) {
  ExprPtr parts[3];
  bool slice = false;
  int part = 0;
  while (!is_op("]")) {
    if (skip_op(":")) {
      slice = true;
      if (++part > 2) fail("invalid slice");
      continue;
    }
    if (parts[part]) fail("expected ']'");
    parts[part] = parse_expression(true);
    if (!slice && is_op(",")) fail("tuple subscripts are not supported");
  }
  advance();
  if (!slice) {
    if (!parts[0]) fail("expected an index");
    auto e = make(ExprType::GetItem, line);
    e->args.push_back(std::move(obj));
    e->args.push_back(std::move(parts[0]));
    return e;
  }
  auto e = make(ExprType::Slice, line);
  e->args.push_back(std::move(obj));
  for (auto& p : parts) e->args.push_back(std::move(p));
  return e;
}

void ExpressionParser::parse_args(Expr& e) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (is_op(")")) break;
    if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
      std::string key = cur().text;
      advance();
      advance();
      e.kwargs.emplace_back(key, parse_expression(true));
    } else {
      if (!e.kwargs.empty()) fail("positional argument after keyword argument");
      e.args.push_back(parse_expression(true));
    }
  }
  advance();
}

ExprPtr ExpressionParser::parse_call(ExprPtr callee) {
  auto e = make(ExprType::Call, cur().line);
  e->args.push_back(std::move(callee));
  parse_args(*e);
  return e;
}

std::string ExpressionParser::dotted_name() {
  std::string n = expect_name();
  while (is_op(".") && peek().type == Tok::Name) {
    advance();
    n += '.';
    n += expect_name();
  }
  return n;
}

ExprPtr ExpressionParser::parse_filter_chain(ExprPtr subject, bool leading_pipe) {
  bool first = true;
  while ((first && !leading_pipe) || skip_op("|")) {
    first = false;
    auto f = make(ExprType::Filter, cur().line);
    f->name = dotted_name();
    f->args.push_back(std::move(subject));
    if (is_op("(")) parse_args(*f);
    subject = std::move(f);
  }
  return subject;
}

ExprPtr ExpressionParser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      node = parse_filter_chain(std::move(node));
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_test(ExprPtr subject) {
  int line = cur().line;
  advance();  // is
  bool negated = skip_name("not");
  auto t = make(ExprType::Test, line);
  t->name = dotted_name();
  t->negated = negated;
  t->args.push_back(std::move(subject));
  const Token& c = cur();
  bool arg_start = c.type == Tok::Name || c.type == Tok::String || c.type == Tok::Int || c.type == Tok::Float ||
                   (c.type == Tok::Op && (c.text == "[" || c.text == "{"));
  if (is_op("(")) {
    parse_args(*t);
  } else if (arg_start && !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail("you cannot chain multiple tests with is");
    t->args.push_back(parse_postfix(parse_primary()));
  }
  return t;
}

}  // namespace fs::jinja

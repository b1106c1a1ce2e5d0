#pragma once
// The expression half of the template parser: a cursor over the tokens and Jinja2's expression grammar (conditional
// expressions, the boolean, comparison and arithmetic operators by precedence, literals, subscripts, calls, filters
// and tests). The statement parser (parser.cpp) builds on it.
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace fs::jinja {

class ExpressionParser {
 public:
  explicit ExpressionParser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

 protected:
  // Nesting of statements and expressions, bounded so that hostile templates cannot exhaust the stack.
  struct DepthGuard {
    ExpressionParser& p;
    explicit DepthGuard(ExpressionParser& parser);
    ~DepthGuard() { --p.depth_; }
  };

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  void advance() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  [[noreturn]] void fail(const std::string& msg) const;
  static std::string describe(const Token& t);
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == Tok::Name && cur().text == name; }
  bool skip_op(const char* op);
  bool skip_name(const char* name);
  void expect_op(const char* op);
  std::string expect_name();

  // An expression, or a tuple when commas follow (`{{ a, b }}`, `set x = 1, 2`).
  ExprPtr parse_tuple(bool with_condexpr);
  ExprPtr parse_expression(bool with_condexpr);
  // `| f(args) | g` applied to `subject` (null in filter blocks / set blocks).
  ExprPtr parse_filter_chain(ExprPtr subject, bool leading_pipe = true);

 private:
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;

  static ExprPtr make(ExprType type, int line);
  static ExprPtr literal(Value v, int line);
  static ExprPtr binary(ExprType type, Op op, ExprPtr l, ExprPtr r, int line);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr obj, int line);
  void parse_args(Expr& e);
  ExprPtr parse_call(ExprPtr callee);
  std::string dotted_name();
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_test(ExprPtr subject);
};

}  // namespace fs::jinja

#pragma once
// The parsed template: expression and statement trees.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace fs::jinja {

enum class ExprType : uint8_t {
  Literal, Name, List, Tuple, Dict, GetAttr, GetItem, Slice, Call, Filter, Test, Unary, Binary, Compare, And, Or,
  Cond
};

enum class Op : uint8_t {
  None, Add, Sub, Mul, Div, FloorDiv, Mod, Pow, Concat, Eq, Ne, Lt, Le, Gt, Ge, In, NotIn, Not, Neg, Pos
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprType type;
  int line = 0;
  Op op = Op::None;
  bool negated = false;  // Test: `is not`
  Value literal;
  std::string name;  // Name, attribute, filter or test name
  // Operands. GetAttr: [obj]; GetItem: [obj, key]; Slice: [obj, start, stop, step] (null when absent);
  // Call: [callee, positional...]; Filter/Test: [subject (null in a filter block), positional...];
  // Cond: [then, condition, else (null)]; Dict: [key, value, key, value...].
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<Op> ops;  // Compare: one operator between each pair of operands in `args`
};

enum class StmtType : uint8_t {
  Data, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, With, Break, Continue, Sequence
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Param {
  std::string name;
  ExprPtr default_value;  // null: no default
};

struct Stmt {
  StmtType type;
  int line = 0;
  std::string text;  // Data text; Macro name
  ExprPtr expr;      // Output value, Set value, For iterable, CallBlock call, FilterBlock filter
  ExprPtr cond;      // For `if` filter
  // Set/For targets: names, or for a namespace attribute {namespace, attribute} with `attr_target`.
  std::vector<std::string> targets;
  bool attr_target = false;
  std::vector<std::pair<ExprPtr, Body>> branches;  // If: (condition, body)...
  Body body, else_body;
  std::vector<Param> params;  // Macro parameters; CallBlock caller parameters; With assignments
};

}  // namespace fs::jinja

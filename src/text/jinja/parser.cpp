#include "text/jinja/parser.h"

#include <set>

#include "text/jinja/expression_parser.h"
#include "text/jinja/lexer.h"

namespace fs::jinja {
namespace {

// Statements (data, output, if, for, set, macro, call, filter, with, generation, break, continue) over the
// expression parser.
class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  Body parse() {
    Body body = subparse({});
    if (cur().type != Tok::Eof) fail("unexpected '" + cur().text + "'");
    return body;
  }

 private:
  int loop_depth_ = 0;

  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) fail("expected token 'end of statement block', got " + describe(cur()));
    advance();
  }

  StmtPtr make_stmt(StmtType type, int line) {
    auto s = std::make_unique<Stmt>();
    s->type = type;
    s->line = line;
    return s;
  }

  // Statements until a block tag whose name is in `ends`; leaves the position on that name.
  Body subparse(const std::set<std::string>& ends) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::Eof) {
        if (!ends.empty()) fail("unexpected end of template, expected '" + *ends.begin() + "'");
        return body;
      }
      if (t.type == Tok::Data) {
        auto s = make_stmt(StmtType::Data, t.line);
        s->text = t.text;
        body.push_back(std::move(s));
        advance();
      } else if (t.type == Tok::VarBegin) {
        advance();
        auto s = make_stmt(StmtType::Output, cur().line);
        s->expr = parse_tuple(true);
        if (cur().type != Tok::VarEnd) fail("expected token 'end of print statement', got " + describe(cur()));
        advance();
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        advance();
        if (cur().type == Tok::Name && ends.count(cur().text)) return body;
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  // After an end tag name: consumes it and the block end.
  void end_tag(const char* name) {
    if (!skip_name(name)) fail(std::string("expected '") + name + "'");
    expect_block_end();
  }

  StmtPtr parse_statement() {
    if (cur().type != Tok::Name) fail("tag name expected");
    std::string tag = cur().text;
    int line = cur().line;
    advance();
    if (tag == "if") return parse_if(line);
    if (tag == "for") return parse_for(line);
    if (tag == "set") return parse_set(line);
    if (tag == "macro") return parse_macro(line);
    if (tag == "call") return parse_call_block(line);
    if (tag == "filter") return parse_filter_block(line);
    if (tag == "with") return parse_with(line);
    if (tag == "generation") {
      expect_block_end();
      auto s = make_stmt(StmtType::Sequence, line);
      s->body = subparse({"endgeneration"});
      end_tag("endgeneration");
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop");
      expect_block_end();
      return make_stmt(tag == "break" ? StmtType::Break : StmtType::Continue, line);
    }
    fail("encountered unknown tag '" + tag + "'");
  }

  StmtPtr parse_if(int line) {
    auto s = make_stmt(StmtType::If, line);
    while (true) {
      ExprPtr cond = parse_tuple(false);
      expect_block_end();
      Body body = subparse({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      std::string t = expect_name();
      if (t == "elif") continue;
      if (t == "else") {
        expect_block_end();
        s->else_body = subparse({"endif"});
        end_tag("endif");
      } else {
        expect_block_end();
      }
      return s;
    }
  }

  void parse_targets(Stmt& s, bool allow_namespace) {
    bool paren = skip_op("(");
    s.targets.push_back(expect_name());
    if (allow_namespace && !paren && is_op(".")) {
      advance();
      s.targets.push_back(expect_name());
      s.attr_target = true;
      return;
    }
    while (skip_op(",")) {
      if (cur().type != Tok::Name) break;
      s.targets.push_back(expect_name());
    }
    if (paren) expect_op(")");
  }

  StmtPtr parse_for(int line) {
    auto s = make_stmt(StmtType::For, line);
    parse_targets(*s, false);
    if (!skip_name("in")) fail("expected 'in', got " + describe(cur()));
    s->expr = parse_tuple(false);
    if (skip_name("if")) s->cond = parse_expression(true);
    if (is_name("recursive")) fail("recursive loops are not supported");
    expect_block_end();
    ++loop_depth_;
    s->body = subparse({"endfor", "else"});
    --loop_depth_;
    if (skip_name("else")) {
      expect_block_end();
      s->else_body = subparse({"endfor"});
    }
    end_tag("endfor");
    return s;
  }

  StmtPtr parse_set(int line) {
    auto s = make_stmt(StmtType::Set, line);
    parse_targets(*s, true);
    if (skip_op("=")) {
      s->expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    s->type = StmtType::SetBlock;
    if (is_op("|")) s->expr = parse_filter_chain(nullptr);
    expect_block_end();
    s->body = subparse({"endset"});
    end_tag("endset");
    return s;
  }

  void parse_params(std::vector<Param>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      Param p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expression(true);
      params.push_back(std::move(p));
    }
    advance();
  }

  StmtPtr parse_macro(int line) {
    auto s = make_stmt(StmtType::Macro, line);
    s->text = expect_name();
    parse_params(s->params);
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = subparse({"endmacro"});
    loop_depth_ = saved;
    end_tag("endmacro");
    return s;
  }

  StmtPtr parse_call_block(int line) {
    auto s = make_stmt(StmtType::CallBlock, line);
    if (is_op("(")) parse_params(s->params);
    s->expr = parse_expression(true);
    if (s->expr->type != ExprType::Call) fail("expected call");
    expect_block_end();
    s->body = subparse({"endcall"});
    end_tag("endcall");
    return s;
  }

  StmtPtr parse_filter_block(int line) {
    auto s = make_stmt(StmtType::FilterBlock, line);
    s->expr = parse_filter_chain(nullptr, false);
    expect_block_end();
    s->body = subparse({"endfilter"});
    end_tag("endfilter");
    return s;
  }

  StmtPtr parse_with(int line) {
    auto s = make_stmt(StmtType::With, line);
    while (cur().type != Tok::BlockEnd) {
      if (!s->params.empty()) expect_op(",");
      Param p;
      p.name = expect_name();
      expect_op("=");
      p.default_value = parse_expression(true);
      s->params.push_back(std::move(p));
    }
    expect_block_end();
    s->body = subparse({"endwith"});
    end_tag("endwith");
    return s;
  }
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace fs::jinja

// Errors a template can raise, limits that stop hostile templates, and where templates are found.
#include <fstream>

#include <gtest/gtest.h>

#include "support/fixtures.h"
#include "text/chat_template.h"
#include "text/jinja/template.h"

namespace fs::test {
namespace {

using jinja::Limits;
using jinja::Template;
using jinja::Value;
using ojson = nlohmann::ordered_json;

std::string render(const std::string& source, Limits limits = {}) { return Template(source, limits).render({}); }

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(TemplateErrors, RaiseExceptionCarriesTheMessage) {
  ChatTemplate t("{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with user') }}"
                 "{% endif %}ok");
  ojson bad = ojson::array({{{"role", "assistant"}, {"content", "x"}}});
  EXPECT_EQ(error_of([&] { t.render(bad, nullptr, true); }), "Conversation must start with user");
  ojson good = ojson::array({{{"role", "user"}, {"content", "x"}}});
  EXPECT_EQ(t.render(good, nullptr, true), "ok");
}

TEST(TemplateErrors, GemmaRejectsNonAlternatingRoles) {
  FS_REQUIRE_SHARED(shared);
  auto t = ChatTemplate::load(shared / "tokenizers/gemma3");
  ASSERT_TRUE(t);
  ojson msgs = ojson::array({{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}});
  EXPECT_EQ(error_of([&] { t->render(msgs, nullptr, true); }),
            "Conversation roles must alternate user/assistant/user/assistant/...");
}

TEST(TemplateErrors, SyntaxErrorsNameTheLine) {
  std::string e = error_of([] { Template("line one\n{% if x %}\nfine\n{{ 1 + }}\n{% endif %}"); });
  EXPECT_NE(e.find("line 4"), std::string::npos) << e;
  e = error_of([] { Template("a\nb\n{% for x in y %}never closed"); });
  EXPECT_NE(e.find("syntax error"), std::string::npos) << e;
  e = error_of([] { Template("\n\n{% frobnicate %}"); });
  EXPECT_NE(e.find("line 3"), std::string::npos) << e;
  EXPECT_NE(e.find("frobnicate"), std::string::npos) << e;
  e = error_of([] { Template("{{ 'unterminated }}"); });
  EXPECT_NE(e.find("line 1"), std::string::npos) << e;
  e = error_of([] { Template("x\n{# open comment"); });
  EXPECT_NE(e.find("comment"), std::string::npos) << e;
  e = error_of([] { Template("{% break %}"); });
  EXPECT_NE(e.find("outside of a loop"), std::string::npos) << e;
}

TEST(TemplateErrors, RuntimeErrorsNameTheLine) {
  std::string e = error_of([] { render("a\nb\n{{ undefined_thing.attr }}"); });
  EXPECT_NE(e.find("line 3"), std::string::npos) << e;
  EXPECT_NE(e.find("'undefined_thing' is undefined"), std::string::npos) << e;
  e = error_of([] { render("{{ 1 + 'a' }}"); });
  EXPECT_NE(e.find("unsupported operand"), std::string::npos) << e;
  e = error_of([] { render("{{ 1 // 0 }}"); });
  EXPECT_NE(e.find("division"), std::string::npos) << e;
  e = error_of([] { render("{{ x | nosuchfilter }}"); });
  EXPECT_NE(e.find("nosuchfilter"), std::string::npos) << e;
}

TEST(TemplateLimits, InfiniteLoopsHitTheStepLimit) {
  Limits small;
  small.max_steps = 100000;
  std::string e = error_of([&] {
    render("{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}{% endfor %}"
           "{% endfor %}{% endfor %}", small);
  });
  EXPECT_NE(e.find("step limit"), std::string::npos) << e;
  // The default limit stops it too, in bounded time.
  e = error_of([] {
    render("{% for a in range(5000) %}{% for b in range(5000) %}{{ '' }}{% endfor %}{% endfor %}");
  });
  EXPECT_NE(e.find("step limit"), std::string::npos) << e;
}

TEST(TemplateLimits, RecursionHitsTheDepthLimit) {
  std::string e = error_of([] { render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"); });
  EXPECT_NE(e.find("recursion too deep"), std::string::npos) << e;
  // Deeply nested source is refused by the parser rather than overflowing the stack.
  e = error_of([] { Template(std::string("{{ ") + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"); });
  EXPECT_NE(e.find("nested too deeply"), std::string::npos) << e;
  e = error_of([] { Template(std::string(3000, '[') + "{{ " + std::string(3000, '[') + " }}"); });
  EXPECT_NE(e.find("syntax error"), std::string::npos) << e;
}

TEST(TemplateLimits, HugeOutputsAndStringsAreRefused) {
  Limits small;
  small.max_output = 1 << 20;
  std::string e = error_of([&] { render("{% for i in range(100000) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}", small); });
  EXPECT_NE(e.find("output exceeded"), std::string::npos) << e;
  e = error_of([] { render("{{ 'x' * 1000000000000 }}"); });
  EXPECT_NE(e.find("larger than the limit"), std::string::npos) << e;
  e = error_of([] {
    render("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
           "{% endfor %}{{ ns.s | length }}");
  });
  EXPECT_NE(e.find("larger than the limit"), std::string::npos) << e;
  e = error_of([] { render("{{ range(10000000000) | length }}"); });
  EXPECT_NE(e.find("limit"), std::string::npos) << e;
  e = error_of([] {
    render("{% set ns = namespace(l=[1]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}");
  });
  EXPECT_NE(e.find("nested too deeply"), std::string::npos) << e;
}

TEST(TemplateLimits, EmptySequencesRepeatedAnyNumberOfTimesStayEmptyAtOnce) {
  // The fuzzer's 229-byte template spent 30 s appending nothing 10^18 times; these finish at once.
  EXPECT_EQ(render("{{ '' * 1000000000000000000 }}|{{ (() * 1000000000000000000) | length }}|"
                   "{{ ([] * 1000000000000000000) | length }}|{{ 1000000000000000000 * '' }}"),
            "|0|0|");
}

TEST(TemplateLimits, LegitimateLongConversationsFitEasily) {
  ChatTemplate t("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}");
  ojson msgs = ojson::array();
  for (int k = 0; k < 5000; ++k) msgs.push_back({{"role", k % 2 ? "assistant" : "user"}, {"content", std::string(200, 'a')}});
  EXPECT_GT(t.render(msgs, nullptr, false).size(), 1000000u);
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() / ("foldserve-tmpl-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path / name, std::ios::binary) << text; }
};

TEST(TemplateSources, EveryPlaceTransformersLooks) {
  ojson one_user = ojson::array({{{"role", "user"}, {"content", "hi"}}});
  {
    TempDir d;
    d.write("tokenizer_config.json", R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": null,
      "chat_template": [{"name": "tool_use", "template": "TOOLS"}, {"name": "default", "template": "{{ bos_token }}D{{ eos_token }}"}]})");
    auto t = ChatTemplate::load(d.path);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->render(one_user, nullptr, true), "<s>D");
  }
  {
    TempDir d;
    d.write("tokenizer_config.json", R"({"bos_token": "<b>", "eos_token": "</e>", "chat_template": "config"})");
    d.write("chat_template.json", R"({"chat_template": "json {{ eos_token }}"})");
    EXPECT_EQ(ChatTemplate::load(d.path)->render(one_user, nullptr, true), "json </e>");
    d.write("chat_template.jinja", "jinja {{ messages[0].content }}\n");
    EXPECT_EQ(ChatTemplate::load(d.path)->render(one_user, nullptr, true), "jinja hi");
  }
  {
    TempDir d;
    d.write("tokenizer_config.json", R"({"bos_token": "<b>"})");
    EXPECT_FALSE(ChatTemplate::load(d.path));
    d.write("tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "x"}]})");
    EXPECT_THROW(ChatTemplate::load(d.path), Error);
  }
}

TEST(TemplateSources, KeyOrderOfToolsIsKept) {
  ChatTemplate t("{{ tools | tojson }}");
  ojson tools = ojson::parse(R"([{"z": 1, "a": {"y": true, "b": null}}])");
  EXPECT_EQ(t.render(ojson::array(), tools, false), R"([{"z": 1, "a": {"y": true, "b": null}}])");
}

}  // namespace
}  // namespace fs::test

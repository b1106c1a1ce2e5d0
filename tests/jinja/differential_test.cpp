// Differential test: our engine and Python's real Jinja2 (scripts/jinja_reference.py, transformers' settings)
// render the real chat templates over many generated conversations, and small templates covering the
// language, to the same bytes (or both fail).
#include <gtest/gtest.h>

#include "jinja/conversation_generator.h"
#include "jinja/jinja_test_support.h"
#include "core/files.h"
#include "support/fixtures.h"
#include "text/chat_template.h"
#include "text/jinja/template.h"

namespace fs::test {
namespace {

#define REQUIRE_PYTHON_JINJA()                                                                       \
  if (!python_jinja_available()) {                                                                   \
    if (running_in_ci()) FAIL() << "/usr/bin/python3 cannot import jinja2 (install python3-jinja2)"; \
    GTEST_SKIP() << "/usr/bin/python3 cannot import jinja2 (install python3-jinja2)";                \
  }

uint32_t seed_of(const std::string& name) {
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ uint8_t(c)) * 16777619u;
  return h;
}

// Compares one rendering; returns true when Python rendered text (not an error).
bool compare(const ojson& py, const std::string* ours, const std::string& our_error, const std::string& label) {
  if (py.contains("text")) {
    EXPECT_TRUE(ours) << label << ": Python rendered, we failed: " << our_error;
    if (ours) {
      EXPECT_EQ(*ours, py["text"].get<std::string>()) << label;
    }
    return true;
  }
  EXPECT_FALSE(ours) << label << ": Python failed (" << py["error"].get<std::string>() << "), we rendered:\n"
                     << (ours ? *ours : "");
  return false;
}

TEST(Differential, RealTemplatesOverGeneratedConversations) {
  FS_REQUIRE_SHARED(shared);
  REQUIRE_PYTHON_JINJA();
  constexpr int kConversations = 120;
  for (const auto& rt : real_templates(shared)) {
    auto tmpl = ChatTemplate::load(rt.dir);
    ASSERT_TRUE(tmpl) << rt.dir;
    ConversationGenerator gen(seed_of(rt.name));
    std::vector<ojson> convs;
    ojson contexts = ojson::array();
    for (int k = 0; k < kConversations; ++k) {
      ojson c = gen.conversation();
      ojson vars = {{"bos_token", tmpl->bos_token()}, {"eos_token", tmpl->eos_token()}};
      for (const auto& [key, v] : c["kwargs"].items()) vars[key] = v;
      vars["messages"] = c["messages"];
      vars["tools"] = c["tools"];
      vars["documents"] = nullptr;
      vars["add_generation_prompt"] = c["add_generation_prompt"];
      contexts.push_back({{"vars", vars}});
      convs.push_back(std::move(c));
    }
    ojson py = python_render(tmpl->source(), contexts);
    ASSERT_EQ(py.size(), convs.size());
    int rendered = 0;
    for (size_t k = 0; k < convs.size(); ++k) {
      std::string ours, error;
      bool ok = true;
      try {
        ours = tmpl->render(convs[k]["messages"], convs[k]["tools"], convs[k]["add_generation_prompt"].get<bool>(),
                            convs[k]["kwargs"]);
      } catch (const TemplateError& e) {
        ok = false;
        error = e.what();
      }
      rendered += compare(py[k], ok ? &ours : nullptr, error, rt.name + " #" + std::to_string(k) + " " + convs[k].dump());
    }
    // The generator must mostly produce conversations the template accepts, or the test proves little.
    EXPECT_GE(rendered, kConversations / 4) << rt.name;
  }
}

TEST(Differential, HandWrittenTemplates) {
  REQUIRE_PYTHON_JINJA();
  auto dir = std::filesystem::path(FOLDSERVE_SOURCE_DIR) / "tests/jinja/templates";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".jinja") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 8u);
  constexpr int kContexts = 25;
  for (const auto& file : files) {
    std::string source = read_file(file);
    ConversationGenerator gen(seed_of(file.filename().string()));
    ojson contexts = ojson::array();
    for (int k = 0; k < kContexts; ++k) {
      ojson c = gen.conversation();
      ojson vars = c["kwargs"];
      vars["messages"] = c["messages"];
      vars["tools"] = c["tools"];
      vars["add_generation_prompt"] = c["add_generation_prompt"];
      vars["data"] = gen.data();
      vars["items"] = ojson::array({gen.data(1), gen.data(1), gen.data(1), gen.data(1)});
      vars["n"] = int(seed_of(std::to_string(k)) % 13) - 3;
      contexts.push_back({{"vars", vars}});
    }
    ojson py = python_render(source, contexts);
    ASSERT_EQ(py.size(), contexts.size());
    std::optional<jinja::Template> tmpl;
    std::string parse_error;
    try {
      tmpl.emplace(source);
    } catch (const TemplateError& e) {
      parse_error = e.what();
    }
    int rendered = 0;
    for (size_t k = 0; k < contexts.size(); ++k) {
      std::vector<std::pair<std::string, jinja::Value>> vars;
      for (const auto& [key, v] : contexts[k]["vars"].items()) vars.emplace_back(key, jinja::from_json(v));
      std::string ours, error = parse_error;
      bool ok = tmpl.has_value();
      if (ok) {
        try {
          ours = tmpl->render(vars);
        } catch (const TemplateError& e) {
          ok = false;
          error = e.what();
        }
      }
      rendered += compare(py[k], ok ? &ours : nullptr, error,
                          file.filename().string() + " #" + std::to_string(k) + " " + contexts[k].dump());
    }
    EXPECT_GE(rendered, kContexts / 2) << file.filename();
  }
}

}  // namespace
}  // namespace fs::test

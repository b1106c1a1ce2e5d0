// The token-level matcher on fortune-demo's BPE and the real Qwen3 tokenizer: seeded random walks over the allowed
// tokens must always finish as JSON that parses (nlohmann) or text the same pattern fully matches (PCRE2), and
// refused schemas and patterns name their reason.
#include <gtest/gtest.h>

#include <deque>
#include <fstream>
#include <random>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "support/fixtures.h"
#include "text/pcre_regex.h"
#include "text/structured/constraint_cache.h"
#include "text/tokenizer.h"

namespace fs::test {
namespace {

using json = nlohmann::json;
using structured::ConstraintSpec;

// Schemas, patterns and refusals shared with the e2e test (tests/server/e2e/structured_cases.json).
const json& cases() {
  static const json c = [] {
    std::ifstream in(std::string(FOLDSERVE_SOURCE_DIR) + "/tests/server/e2e/structured_cases.json");
    return json::parse(in);
  }();
  return c;
}

std::shared_ptr<structured::ConstraintCache> cache_for(const std::string& model) {
  static std::unordered_map<std::string, std::shared_ptr<structured::ConstraintCache>> caches;
  static std::unordered_map<std::string, std::unique_ptr<Tokenizer>> toks;
  auto& c = caches[model];
  if (!c) {
    toks[model] = Tokenizer::load(shared_dir() / "models" / model);
    c = std::make_shared<structured::ConstraintCache>(std::make_shared<structured::TokenVocab>(*toks[model]));
  }
  return c;
}

// The single-byte token of every byte value the vocabulary has.
std::vector<int32_t> byte_tokens(const structured::TokenVocab& v) {
  std::vector<int32_t> out(256, -1);
  for (int32_t id = 0; id < v.size(); ++id)
    if (v.bytes(id).size() == 1 && out[uint8_t(v.bytes(id)[0])] < 0) out[uint8_t(v.bytes(id)[0])] = id;
  return out;
}

// First token of a shortest byte path from `state` to an accepting state.
int32_t finishing_token(structured::CompiledConstraint& c, int32_t state, const std::vector<int32_t>& bytes) {
  std::unordered_map<int32_t, int32_t> first;  // state → first token on the path to it
  std::deque<int32_t> queue{state};
  first[state] = -1;
  while (!queue.empty()) {
    int32_t s = queue.front();
    queue.pop_front();
    if (c.accepting(s) && s != state) return first[s];
    for (int32_t id : bytes) {
      if (id < 0) continue;
      int32_t n = c.advance(s, id);
      if (n < 0 || first.count(n)) continue;
      first[n] = first[s] < 0 ? id : first[s];
      queue.push_back(n);
    }
  }
  return -1;
}

// A seeded walk: random allowed tokens, then (after `wander` steps) the shortest way to an end.
std::string walk(structured::CompiledConstraint& c, uint64_t seed, int wander) {
  std::mt19937_64 rng(seed);
  const auto bytes = byte_tokens(c.vocab());
  structured::TokenConstraint tc(std::shared_ptr<structured::CompiledConstraint>(&c, [](auto*) {}));
  std::string text;
  for (int step = 0; step < 4000; ++step) {
    const bool done = tc.complete();
    if (done && (step >= wander || rng() % 4 == 0)) return text;
    int32_t pick = -1;
    if (step < wander) {
      std::vector<float> logits(size_t(c.vocab().size()), 0.0f);
      if (tc.mask(logits, {}) == 0) {
        if (done) return text;
        break;
      }
      std::vector<int32_t> allowed;
      for (size_t i = 0; i < logits.size(); ++i)
        if (logits[i] == 0.0f) allowed.push_back(int32_t(i));
      pick = allowed[rng() % allowed.size()];
    } else {
      pick = finishing_token(c, tc.state(), bytes);
      if (pick < 0) break;
    }
    EXPECT_TRUE(tc.accept(pick));
    text += c.vocab().bytes(pick);
  }
  ADD_FAILURE() << "the walk did not finish; text so far: " << text;
  return text;
}

class StructuredMatcher : public ::testing::TestWithParam<std::string> {};

TEST_P(StructuredMatcher, EverySchemaWalkParsesAsJson) {
  FS_REQUIRE_SHARED(dir);
  auto cache = cache_for(GetParam());
  for (const auto& c : cases()["schemas"]) {
    auto compiled = cache->get({ConstraintSpec::Kind::JsonSchema, c["schema"].dump()});
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      std::string text = walk(*compiled, seed * 7919 + c["schema"].dump().size(), int(seed) * 12);
      json parsed = json::parse(text, nullptr, false);
      EXPECT_FALSE(parsed.is_discarded()) << c["name"].get<std::string>() << " seed " << seed << ": " << text;
    }
  }
}

TEST_P(StructuredMatcher, RegexWalksFullyMatchUnderPcre2) {
  FS_REQUIRE_SHARED(dir);
  auto cache = cache_for(GetParam());
  for (const std::string pattern : cases()["regexes"]) {
    auto compiled = cache->get({ConstraintSpec::Kind::Regex, pattern});
    text::Regex whole("\\A(?:" + pattern + ")\\z");
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      std::string text = walk(*compiled, seed, int(seed) * 8);
      std::vector<text::Span> spans;
      whole.find_all(text, spans);
      EXPECT_TRUE(!spans.empty() || text.empty()) << pattern << " produced '" << text << "'";
    }
  }
}

TEST_P(StructuredMatcher, JsonModeAndToolCallsParse) {
  FS_REQUIRE_SHARED(dir);
  auto cache = cache_for(GetParam());
  auto object = cache->get({ConstraintSpec::Kind::JsonObject, ""});
  json tools = json::array({{{"name", "get_weather"}, {"parameters", cases()["schemas"][5]["schema"]}}});
  auto call = cache->get({ConstraintSpec::Kind::ToolCall, tools.dump()});
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    json o = json::parse(walk(*object, seed, 20), nullptr, false);
    EXPECT_TRUE(o.is_object());
    std::string text = walk(*call, seed, 20);
    const std::string open = "<tool_call>\n", close = "\n</tool_call>";
    ASSERT_EQ(text.rfind(open, 0), 0u) << text;
    ASSERT_EQ(text.substr(text.size() - close.size()), close);
    json body = json::parse(text.substr(open.size(), text.size() - open.size() - close.size()), nullptr, false);
    EXPECT_EQ(body.value("name", ""), "get_weather") << text;
    EXPECT_TRUE(body.contains("arguments"));
  }
}

TEST_P(StructuredMatcher, SpecialTokensAreNeverAllowedAndEosOnlyAtTheEnd) {
  FS_REQUIRE_SHARED(dir);
  auto tok = Tokenizer::load(shared_dir() / "models" / GetParam());
  auto cache = cache_for(GetParam());
  auto compiled = cache->get({ConstraintSpec::Kind::Regex, "[a-z]{1,3}"});
  structured::TokenConstraint tc(compiled);
  const int32_t eos = *tok->token_to_id("<|im_end|>");
  std::vector<float> logits(size_t(tok->vocab_size()), 1.0f);
  tc.mask(logits, std::vector<int32_t>{eos});
  for (int32_t id = 0; id < tok->vocab_size(); ++id) {
    if (tok->is_special(id)) {
      EXPECT_LT(logits[size_t(id)], 0.0f) << id;
    }
  }
  ASSERT_TRUE(tc.accept(*tok->token_to_id("a")));
  std::fill(logits.begin(), logits.end(), 1.0f);
  tc.mask(logits, std::vector<int32_t>{eos});
  EXPECT_EQ(logits[size_t(eos)], 1.0f);
  // Allowed logits keep their values exactly.
  EXPECT_EQ(logits[size_t(*tok->token_to_id("b"))], 1.0f);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, StructuredMatcher, ::testing::Values("fortune-demo", "tiny-qwen3"));

TEST(StructuredRefusals, NameTheKeywordOrReason) {
  for (const auto& c : cases()["refused"]) {
    const json& schema = c["schema"];
    const std::string reason = c["reason"];
    try {
      structured::grammar_for({ConstraintSpec::Kind::JsonSchema, schema.dump()});
      ADD_FAILURE() << schema.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  }
  for (const char* bad : {"(a", "a{3,1}", "\\1", "(?=a)", "\\b", "[z-a]", "a++", "\\xzz", "\\x1", "\\u12g4"}) {
    EXPECT_THROW(structured::grammar_for({ConstraintSpec::Kind::Regex, bad}), Error) << bad;
  }
  // Tool lists that are not objects with a string name (the fuzzer's "[0]" first) are refused, not thrown past.
  for (const char* bad : {"[0]", "[{}]", "[{\"name\": 7}]", "[[\"name\"]]", "[]", "{\"name\": \"f\"}"}) {
    EXPECT_THROW(structured::grammar_for({ConstraintSpec::Kind::ToolCall, bad}), Error) << bad;
  }
}

}  // namespace
}  // namespace fs::test

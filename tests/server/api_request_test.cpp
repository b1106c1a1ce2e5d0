// Request parsing and validation: valid bodies become requests; every bad one becomes a 400 naming its param.
#include <gtest/gtest.h>

#include "io/hf_config.h"
#include "server/api_request.h"
#include "support/fixtures.h"

namespace fs::server {
namespace {

ParseLimits limits() {
  ParseLimits l;
  l.served_model = "fortune-demo";
  l.vocab_size = 8192;
  return l;
}

ApiError chat_error(const std::string& body) {
  auto r = parse_chat_request(body, limits());
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

ChatRequest chat_ok(const std::string& body) {
  auto r = parse_chat_request(body, limits());
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << " → " << e->message;
  return std::holds_alternative<ChatRequest>(r) ? std::get<ChatRequest>(r) : ChatRequest{};
}

const char* kUser = R"("messages":[{"role":"user","content":"hi"}])";

TEST(ApiRequest, ParsesAFullChatRequest) {
  auto r = chat_ok(std::string("{") + kUser + R"(, "model":"fortune-demo", "max_tokens":48, "temperature":0,
      "top_p":0.9, "top_k":40, "min_p":0.05, "seed":7, "stop":["\n\n","END"], "presence_penalty":0.5,
      "frequency_penalty":-0.5, "repetition_penalty":1.1, "logprobs":true, "top_logprobs":3, "n":2,
      "stream":true, "stream_options":{"include_usage":true}, "draft":false,
      "chat_template_kwargs":{"enable_thinking":false}})");
  EXPECT_EQ(r.model, "fortune-demo");
  EXPECT_EQ(r.gen.max_tokens, 48);
  EXPECT_EQ(r.gen.temperature, 0.0f);
  EXPECT_FLOAT_EQ(*r.gen.top_p, 0.9f);
  EXPECT_EQ(r.gen.top_k, 40);
  EXPECT_FLOAT_EQ(*r.gen.min_p, 0.05f);
  EXPECT_EQ(r.gen.seed, 7u);
  EXPECT_EQ(r.gen.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_FLOAT_EQ(r.gen.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.gen.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(*r.gen.repetition_penalty, 1.1f);
  EXPECT_TRUE(r.gen.logprobs);
  EXPECT_EQ(r.gen.top_logprobs, 3);
  EXPECT_EQ(r.gen.n, 2);
  EXPECT_TRUE(r.gen.stream);
  EXPECT_TRUE(r.gen.include_usage);
  EXPECT_FALSE(r.gen.allow_draft);
  EXPECT_EQ(r.template_kwargs["enable_thinking"], false);
  EXPECT_TRUE(r.tools.is_null());
}

TEST(ApiRequest, MaxCompletionTokensAndSingleStop) {
  auto r = chat_ok(std::string("{") + kUser + R"(, "max_completion_tokens": 5, "stop": "x", "seed": null})");
  EXPECT_EQ(r.gen.max_tokens, 5);
  EXPECT_EQ(r.gen.stop, std::vector<std::string>{"x"});
  EXPECT_FALSE(r.gen.seed.has_value());
}

TEST(ApiRequest, JoinsTextPartsAndMapsDeveloperToSystem) {
  auto r = chat_ok(R"({"messages":[{"role":"developer","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"Tell me "},{"type":"text","text":"a joke."}]},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"f","arguments":"{}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"42"}]})");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "Tell me a joke.");
  EXPECT_EQ(r.messages[2]["content"], "");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(r.messages[3]["tool_call_id"], "c1");
}

TEST(ApiRequest, ToolsReachTheTemplateUnlessToolChoiceIsNone) {
  std::string tools = R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}])";
  auto r = chat_ok(std::string("{") + kUser + "," + tools + "}");
  ASSERT_TRUE(r.tools.is_array());
  EXPECT_EQ(r.tools[0]["function"]["name"], "get_weather");
  auto none = chat_ok(std::string("{") + kUser + "," + tools + R"(, "tool_choice":"none"})");
  EXPECT_TRUE(none.tools.is_null());
  auto named = chat_ok(std::string("{") + kUser + "," + tools +
                       R"(, "tool_choice":{"type":"function","function":{"name":"get_weather"}}})");
  EXPECT_TRUE(named.tools.is_array());
}

struct BadCase {
  std::string body;
  std::string param;
  int status = 400;
};

TEST(ApiRequest, RejectsBadChatBodiesNamingTheParam) {
  std::string u = std::string("{") + kUser + ",";
  std::vector<BadCase> cases = {
      {"", ""},
      {"{not json", ""},
      {"[1,2]", ""},
      {"{}", "messages"},
      {R"({"messages":[]})", "messages"},
      {R"({"messages":"hi"})", "messages"},
      {R"({"messages":[1]})", "messages[0]"},
      {R"({"messages":[{"content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"wizard","content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":5}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})",
       "messages[0].content[0]"},
      {R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})", "messages[0].content[0].text"},
      {R"({"messages":[{"role":"user","content":[{"type":"audio"}]}]})", "messages[0].content[0].type"},
      {R"({"messages":[{"role":"user","content":"x","tool_calls":[]}]})", "messages[0].tool_calls"},
      {u + R"("model":"gpt-4"})", "", 404},
      {u + R"("model":3})", "model"},
      {u + R"("max_tokens":0})", "max_tokens"},
      {u + R"("max_tokens":"5"})", "max_tokens"},
      {u + R"("max_tokens":1.5})", "max_tokens"},
      {u + R"("max_completion_tokens":-1})", "max_completion_tokens"},
      {u + R"("temperature":-0.1})", "temperature"},
      {u + R"("temperature":2.5})", "temperature"},
      {u + R"("temperature":"hot"})", "temperature"},
      {u + R"("top_p":0})", "top_p"},
      {u + R"("top_p":1.5})", "top_p"},
      {u + R"("top_k":-2})", "top_k"},
      {u + R"("min_p":2})", "min_p"},
      {u + R"("seed":"abc"})", "seed"},
      {u + R"("stop":5})", "stop"},
      {u + R"("stop":[""]})", "stop"},
      {u + R"("stop":["a",1]})", "stop"},
      {u + R"("presence_penalty":3})", "presence_penalty"},
      {u + R"("frequency_penalty":-3})", "frequency_penalty"},
      {u + R"("repetition_penalty":0})", "repetition_penalty"},
      {u + R"("logprobs":"yes"})", "logprobs"},
      {u + R"("top_logprobs":3})", "top_logprobs"},
      {u + R"("logprobs":true,"top_logprobs":21})", "top_logprobs"},
      {u + R"("n":0})", "n"},
      {u + R"("n":1000})", "n"},
      {u + R"("stream":1})", "stream"},
      {u + R"("stream_options":[]})", "stream_options"},
      {u + R"("stream_options":{"include_usage":"y"}})", "include_usage"},
      {u + R"("draft":"no"})", "draft"},
      {u + R"("tools":{}})", "tools"},
      {u + R"("tools":[{"type":"function","function":{}}]})", "tools[0].function.name"},
      {u + R"("tools":[{"type":"retrieval","function":{"name":"f"}}]})", "tools[0].type"},
      {u + R"("tool_choice":"sometimes"})", "tool_choice"},
      {u + R"("chat_template_kwargs":[]})", "chat_template_kwargs"},
      {u + R"("response_format":{"type":"yaml"}})", "response_format.type"},
      {u + R"("response_format":{"type":"json_schema","json_schema":{"name":"x"}}})", "response_format.json_schema.schema"},
      {u + R"("regex":""})", "regex"},
      {u + R"("regex":"a","response_format":{"type":"json_object"}})", "regex"},
      {u + R"("tool_choice":"required"})", "tool_choice"},
      {u + R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})", "tool_choice"},
  };
  for (const auto& c : cases) {
    ApiError e = chat_error(c.body);
    EXPECT_EQ(e.status, c.status) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_FALSE(e.message.empty()) << c.body;
  }
}

TEST(ApiRequest, ParsesCompletionPrompts) {
  auto text = parse_completion_request(R"({"prompt":"Once upon","max_tokens":3,"logprobs":2})", limits());
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(text));
  auto& t = std::get<CompletionRequest>(text);
  ASSERT_EQ(t.prompts.size(), 1u);
  EXPECT_EQ(*t.prompts[0].text, "Once upon");
  EXPECT_TRUE(t.gen.logprobs);
  EXPECT_EQ(t.gen.top_logprobs, 2);

  auto ids = parse_completion_request(R"({"prompt":[1,2,3]})", limits());
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(ids));
  EXPECT_EQ(std::get<CompletionRequest>(ids).prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));

  auto list = parse_completion_request(R"({"prompt":["a",[4,5]]})", limits());
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(list));
  auto& l = std::get<CompletionRequest>(list);
  ASSERT_EQ(l.prompts.size(), 2u);
  EXPECT_EQ(*l.prompts[0].text, "a");
  EXPECT_EQ(l.prompts[1].ids, (std::vector<int32_t>{4, 5}));
}

TEST(ApiRequest, RejectsBadCompletionBodies) {
  for (std::string body : {R"({})", R"({"prompt":5})", R"({"prompt":[]})", R"({"prompt":[1,"a"]})",
                           R"({"prompt":[99999]})", R"({"prompt":[-1]})", R"({"prompt":[[]]})",
                           R"({"prompt":[{"a":1}]})", R"({"prompt":"x","logprobs":9})",
                           R"({"prompt":"x","echo":true})"}) {
    auto r = parse_completion_request(body, limits());
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << body;
    EXPECT_EQ(std::get<ApiError>(r).status, 400) << body;
    EXPECT_FALSE(std::get<ApiError>(r).param.empty()) << body;
  }
}

TEST(ApiRequest, SamplingDefaultsComeFromGenerationConfig) {
  FS_REQUIRE_SHARED(shared);
  auto dir = shared / "models" / "fortune-demo";
  GenerationConfig g = load_generation_config(dir, load_model_config(dir));
  GenerationFields omitted;
  SamplingParams s = resolve_sampling(omitted, g);
  ASSERT_TRUE(g.temperature && g.top_p);
  EXPECT_EQ(s.temperature, *g.temperature);
  EXPECT_EQ(s.top_p, *g.top_p);
  GenerationFields given;
  given.temperature = 0.0f;
  given.top_p = 0.5f;
  given.seed = 9;
  s = resolve_sampling(given, g);
  EXPECT_EQ(s.temperature, 0.0f);
  EXPECT_EQ(s.top_p, 0.5f);
  EXPECT_EQ(s.seed, 9u);
  // A model whose generation_config does not sample decodes greedily unless asked otherwise.
  auto qwen = shared / "models" / "tiny-qwen3";
  GenerationConfig greedy = load_generation_config(qwen, load_model_config(qwen));
  ASSERT_FALSE(greedy.do_sample);
  EXPECT_EQ(resolve_sampling(omitted, greedy).temperature, 0.0f);
  EXPECT_EQ(resolve_sampling(given, greedy).top_p, 0.5f);
}

}  // namespace
}  // namespace fs::server

// JSON bodies are bounded in depth and value count before any tree is built: the issue's 100,000-deep body is a
// clean 400, and bodies within the limits still parse.
#include <gtest/gtest.h>

#include "server/api_request.h"
#include "server/json_shape.h"

namespace fs::server {
namespace {

std::string nested(size_t depth, char open, char close) {
  return std::string(depth, open) + std::string(depth, close);
}

std::string chat_with_member(const std::string& value) {
  return R"({"x":)" + value + R"(,"model":"fortune-demo","messages":[{"role":"user","content":"hi"}]})";
}

ParseLimits limits() {
  ParseLimits l;
  l.served_model = "fortune-demo";
  l.vocab_size = 8192;
  return l;
}

TEST(JsonShape, HundredThousandNestedArraysAreRefusedWithoutParsing) {
  const std::string body = chat_with_member(nested(100000, '[', ']'));
  auto r = parse_chat_request(body, limits());
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).status, 400);
  EXPECT_NE(std::get<ApiError>(r).message.find("deeper than"), std::string::npos);
  auto c = parse_completion_request(R"({"prompt":"hi","x":)" + nested(100000, '[', ']') + "}", limits());
  EXPECT_TRUE(std::holds_alternative<ApiError>(c));
}

TEST(JsonShape, DepthAtTheLimitPassesAndOneMoreFails) {
  JsonShapeLimits l;
  l.max_depth = 5;
  EXPECT_FALSE(json_shape_violation(nested(5, '[', ']'), l));
  EXPECT_TRUE(json_shape_violation(nested(6, '[', ']'), l));
  EXPECT_TRUE(json_shape_violation(R"({"a":{"b":{"c":{"d":{"e":{}}}}}})", l));
  EXPECT_FALSE(json_shape_violation(R"({"a":{"b":{"c":{"d":{"e":1}}}}})", l));
}

TEST(JsonShape, BracketsInsideStringsDoNotCount) {
  JsonShapeLimits l;
  l.max_depth = 2;
  EXPECT_FALSE(json_shape_violation(R"({"a":"[[[[{{{{\"[[[[","b":["]]]]"]})", l));
  auto r = parse_chat_request(R"({"messages":[{"role":"user","content":")" + nested(1000, '[', ']') + R"("}]})",
                              limits());
  EXPECT_TRUE(std::holds_alternative<ChatRequest>(r));
}

TEST(JsonShape, ValueCountIsBounded) {
  JsonShapeLimits l;
  l.max_values = 10;
  EXPECT_FALSE(json_shape_violation("[1,2,3,4,5,6,7,8,9]", l));
  EXPECT_TRUE(json_shape_violation("[1,2,3,4,5,6,7,8,9,10]", l));
  EXPECT_TRUE(json_shape_violation(R"(["a","b","c","d","e","f","g","h","i","j"])", l));
  EXPECT_FALSE(json_shape_violation(R"({"k":-1.5e+10,"t":true,"n":null})", l));
  std::string many = "[";
  for (int i = 0; i < (1 << 20) + 1; ++i) many += "0,";
  many += "0]";
  auto r = parse_completion_request(R"({"prompt":)" + many + "}", limits());
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_NE(std::get<ApiError>(r).message.find("values"), std::string::npos);
}

}  // namespace
}  // namespace fs::server

// tiny-qwen3.5 (a hybrid model with recurrent state) served over real HTTP: each reply, greedy or seeded, with
// logprobs, is the same alone and among 8 concurrent requests, at any prefill chunk, with or without drafting, and
// resumed from the prompt cache at the default state stride and at one snapshot a page.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "support/fixtures.h"
#include "support/server_process.h"

namespace fs::test {
namespace {

using json = nlohmann::json;

// The reply's text and its logprobs as JSON text (float bits survive the round trip of %.9g-style output), and its
// cached prompt tokens (-1 on an HTTP error).
std::pair<std::string, int> reply_and_cached(int port, const json& body) {
  auto [status, answer] = post_json(port, "/v1/chat/completions", body);
  if (status != 200) return {"HTTP error " + std::to_string(status) + " " + answer.dump(), -1};
  const json& choice = answer["choices"][0];
  return {choice["message"]["content"].get<std::string>() + "\n" + choice["logprobs"].dump(),
          answer["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>()};
}

std::string reply_of(int port, const json& body) { return reply_and_cached(port, body).first; }

TEST(Qwen35E2E, RepliesAmongEightConcurrentRequestsEqualTheirSoloRuns) {
  FS_REQUIRE_SHARED(shared);
  ServerProcess server({(shared / "models/tiny-qwen3.5").string(), "--device", "cpu", "--parallel", "8",
                        "--context", "256"});
  ASSERT_TRUE(server.ready()) << server.stderr_text();
  const char* asks[] = {"Hello!", "Tell me something about computers.", "What is 2 + 2?", "Name three colors."};
  std::vector<json> bodies;
  for (int i = 0; i < 8; ++i) {
    json body = {{"messages", {{{"role", "user"}, {"content", asks[i % 4]}}}}, {"max_tokens", 24},
                 {"logprobs", true}, {"top_logprobs", 2}};
    body["temperature"] = i % 2 ? 0.9 : 0.0;
    if (i % 2) body["seed"] = 40 + i;
    bodies.push_back(body);
  }
  std::vector<std::string> solo;
  for (const json& b : bodies) solo.push_back(reply_of(server.port(), b));
  const auto together = all_at_once(bodies.size(), [&](size_t i) { return reply_of(server.port(), bodies[i]); });
  for (size_t i = 0; i < bodies.size(); ++i) {
    EXPECT_EQ(solo[i].rfind("HTTP error", 0), std::string::npos) << solo[i];
    EXPECT_EQ(together[i], solo[i]) << "request " << i;
  }
}

TEST(Qwen35E2E, ASecondTurnResumesTheFirstFromItsStateSnapshotAndEqualsAFreshRun) {
  FS_REQUIRE_SHARED(shared);
  const std::string model = (shared / "models/tiny-qwen3.5").string();
  ServerProcess cached({model, "--device", "cpu", "--context", "512"});
  ServerProcess fresh({model, "--device", "cpu", "--context", "512", "--prompt-cache-gib", "0"});
  ASSERT_TRUE(cached.ready()) << cached.stderr_text();
  ASSERT_TRUE(fresh.ready()) << fresh.stderr_text();
  std::string system = "You are a careful assistant.";
  for (int i = 0; i < 12; ++i) system += " Answer briefly and stay on the topic of the question " + std::to_string(i) + ".";
  json first = {{"messages", {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", "Hello!"}}}},
                {"max_tokens", 16}, {"temperature", 0}, {"logprobs", true}};
  json second = first;
  second["messages"][1]["content"] = "Name three colors.";
  ASSERT_EQ(reply_and_cached(cached.port(), first).second, 0);
  const auto [resumed, hit] = reply_and_cached(cached.port(), second);
  const auto [from_scratch, none] = reply_and_cached(fresh.port(), second);
  EXPECT_GT(hit, 16) << "the shared system prompt was not resumed from the cache";
  EXPECT_EQ(none, 0);
  EXPECT_EQ(resumed, from_scratch);
  // Snapshots every page (16 positions, the default here being 48): at least as much of the prefix resumes, from a
  // page boundary, and the reply is the same.
  ServerProcess fine({model, "--device", "cpu", "--context", "512", "--prompt-cache-state-stride", "16"});
  ASSERT_TRUE(fine.ready()) << fine.stderr_text();
  ASSERT_EQ(reply_and_cached(fine.port(), first).second, 0);
  const auto [fine_resumed, fine_hit] = reply_and_cached(fine.port(), second);
  EXPECT_GE(fine_hit, hit);
  EXPECT_EQ(fine_hit % 16, 0);
  EXPECT_EQ(fine_resumed, from_scratch);
}

TEST(Qwen35E2E, AStateStrideOffTheKvPagesIsRefusedByName) {
  FS_REQUIRE_SHARED(shared);
  ServerProcess bad({(shared / "models/tiny-qwen3.5").string(), "--device", "cpu", "--prompt-cache-state-stride", "20"},
                    10);
  EXPECT_FALSE(bad.ready());
  EXPECT_NE(bad.stderr_text().find("--prompt-cache-state-stride must be a multiple of 16"), std::string::npos)
      << bad.stderr_text();
}

// Prefill chunks of 1, 3, 17 and 64 tokens, and drafting (tiny-qwen3 shares the tokenizer; n-grams), leave every
// reply and its logprobs as they are: the recurrent state runs token by token and rolls back to kept rows.
TEST(Qwen35E2E, PrefillChunksAndDraftingGiveTheSameReplies) {
  FS_REQUIRE_SHARED(shared);
  const std::string model = (shared / "models/tiny-qwen3.5").string();
  std::vector<json> bodies;
  const char* asks[] = {"Tell me something about computers, and then something about the sea.", "Hello!"};
  for (int i = 0; i < 4; ++i) {
    json body = {{"messages", {{{"role", "user"}, {"content", asks[i % 2]}}}}, {"max_tokens", 20},
                 {"logprobs", true}, {"top_logprobs", 2}, {"temperature", i < 2 ? 0.0 : 0.8}};
    if (i >= 2) body["seed"] = 70 + i;
    bodies.push_back(body);
  }
  std::vector<std::string> want;
  {
    ServerProcess base({model, "--device", "cpu", "--prefill-chunk", "64"});
    ASSERT_TRUE(base.ready()) << base.stderr_text();
    for (const json& b : bodies) want.push_back(reply_of(base.port(), b));
  }
  const std::vector<std::vector<std::string>> variants = {
      {"--prefill-chunk", "1"},
      {"--prefill-chunk", "3"},
      {"--prefill-chunk", "17"},
      {"--drafter", (shared / "models/tiny-qwen3").string(), "--draft-round-rows", "0"},
      {"--draft", "ngram", "--draft-tokens", "4"}};
  for (const auto& flags : variants) {
    SCOPED_TRACE(flags[0] + " " + flags[1]);
    std::vector<std::string> args = {model, "--device", "cpu", "--parallel", "4"};
    args.insert(args.end(), flags.begin(), flags.end());
    ServerProcess server(args);
    ASSERT_TRUE(server.ready()) << server.stderr_text();
    for (size_t i = 0; i < bodies.size(); ++i) EXPECT_EQ(reply_of(server.port(), bodies[i]), want[i]) << "alone " << i;
    const auto together = all_at_once(bodies.size(), [&](size_t i) { return reply_of(server.port(), bodies[i]); });
    for (size_t i = 0; i < bodies.size(); ++i) EXPECT_EQ(together[i], want[i]) << "together " << i;
    if (flags[0] == "--drafter") {
      const std::string m = metrics_text(server.port());
      EXPECT_GT(std::stod("0" + metric_value(m, "foldserve_draft_tokens_total")), 0.0) << m;
    }
  }
}

}  // namespace
}  // namespace fs::test

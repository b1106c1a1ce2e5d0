// A server whose KV pool is too small for all its streams at once preempts and resumes them: every reply, greedy
// or seeded, equals the same request run alone, and /metrics counts the preemptions.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "support/fixtures.h"
#include "support/server_process.h"

namespace fs::test {
namespace {

using json = nlohmann::json;

std::string reply_of(int port, const json& body) {
  auto [status, answer] = post_json(port, "/v1/chat/completions", body);
  if (status != 200) return "HTTP error " + std::to_string(status) + " " + answer.dump();
  return answer["choices"][0]["message"]["content"].get<std::string>();
}

TEST(PreemptionE2E, RepliesUnderAPoolTooSmallEqualTheirSoloRuns) {
  FS_REQUIRE_SHARED(shared);
  // tiny-qwen3's random weights rarely say eos, so its replies run long enough for the 8 streams to overlap, and any
  // two of them need more than the 12 pages.
  ServerProcess server({(shared / "models" / "tiny-qwen3").string(), "--kv-pages", "12", "--context", "192",
                        "--parallel", "8", "--prompt-cache-gib", "0", "--device", "cpu"});
  ASSERT_TRUE(server.ready()) << server.stderr_text();
  json cases = read_json_file(shared / "reference" / "fortune-demo" / "cases.json")["cases"];
  std::vector<json> bodies;
  for (int i = 0; i < 8; ++i) {
    json body = {{"messages", {{{"role", "user"}, {"content", cases[size_t(i) % cases.size()]["ask"]}}}},
                 {"max_tokens", 150}};
    body["temperature"] = i % 2 ? 1.0 : 0.0;
    if (i % 2) body["seed"] = 100 + i;
    bodies.push_back(body);
  }
  std::vector<std::string> solo;
  for (const json& b : bodies) solo.push_back(reply_of(server.port(), b));
  const auto together = all_at_once(bodies.size(), [&](size_t i) { return reply_of(server.port(), bodies[i]); });
  for (size_t i = 0; i < bodies.size(); ++i) {
    EXPECT_EQ(together[i], solo[i]) << "request " << i;
    EXPECT_EQ(solo[i].rfind("HTTP error", 0), std::string::npos) << solo[i];
  }
  httplib::Client c("127.0.0.1", server.port());
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  size_t at = metrics->body.find("\nfoldserve_preemptions_total ");
  ASSERT_NE(at, std::string::npos) << metrics->body;
  EXPECT_GT(std::stol(metrics->body.substr(at + 29)), 0) << metrics->body.substr(at, 60);
}

}  // namespace
}  // namespace fs::test

// serve --drafter and --draft ngram over HTTP: every reply and its logprobs equal the undrafted server's, one at a
// time and 8 at once (greedy, seeded at temperature 0.8, penalties and stop strings), /metrics and the request log
// report the drafts, "draft": false is honoured, and a drafter of another tokenizer stops the server by name.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "support/fixtures.h"
#include "support/server_process.h"

namespace fs::test {
namespace {

using json = nlohmann::json;

// The choices of a chat completion (content, finish reason and logprobs), or the HTTP error.
std::string choices_of(int port, const json& body) {
  auto [status, answer] = post_json(port, "/v1/chat/completions", body);
  if (status != 200) return "HTTP error " + std::to_string(status) + " " + answer.dump();
  return answer["choices"].dump();
}

std::vector<json> bodies(const std::filesystem::path& shared) {
  const json reference = read_json_file(shared / "reference" / "fortune-demo" / "cases.json");
  std::vector<json> out;
  for (int i = 0; i < 8; ++i) {
    const json& c = reference["cases"][size_t(i) % reference["cases"].size()];
    json b = {{"messages", {{{"role", "user"}, {"content", c["ask"]}}}}, {"max_tokens", 64}, {"logprobs", true},
              {"top_logprobs", 2}};
    b["temperature"] = i < 3 ? 0.0 : 0.8;
    if (i >= 3) b["seed"] = 40 + i;
    if (i == 6) b["frequency_penalty"] = 0.5, b["presence_penalty"] = 0.3;
    if (i == 7) b["stop"] = json::array({c["reply"].get<std::string>().substr(12, 3)});
    out.push_back(b);
  }
  return out;
}

TEST(SpeculativeE2E, DraftedRepliesEqualUndraftedOnesAloneAndEightAtOnce) {
  FS_REQUIRE_SHARED(shared);
  const auto work = std::filesystem::temp_directory_path() / ("fs-spec-" + std::to_string(::getpid()));
  std::filesystem::create_directories(work);
  const auto log = work / "requests.jsonl";
  const auto reqs = bodies(shared);
  std::vector<std::string> want;
  {
    ServerProcess plain({"--parallel", "8", "--context", "512"});
    ASSERT_TRUE(plain.ready()) << plain.stderr_text();
    for (const json& b : reqs) want.push_back(choices_of(plain.port(), b));
  }
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--drafter", (shared / "models/fortune-draft").string()},
        std::vector<std::string>{"--draft", "ngram", "--draft-tokens", "4"}}) {
    SCOPED_TRACE(flags[1]);
    // No cap on a round's rows, so the eight concurrent requests draft too.
    std::vector<std::string> args = {"--parallel", "8", "--context", "512", "--draft-round-rows", "0"};
    args.insert(args.end(), {"--request-log", log.string()});
    args.insert(args.end(), flags.begin(), flags.end());
    ServerProcess server(args);
    ASSERT_TRUE(server.ready()) << server.stderr_text();
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(choices_of(server.port(), reqs[i]), want[i]) << "request " << i;
    const auto together = all_at_once(reqs.size(), [&](size_t i) { return choices_of(server.port(), reqs[i]); });
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i], want[i]) << "request " << i << " of 8 at once";
    json off = reqs[0];
    off["draft"] = false;
    EXPECT_EQ(choices_of(server.port(), off), want[0]);
    const std::string m = metrics_text(server.port());
    ASSERT_FALSE(m.empty());
    EXPECT_GT(std::stod(metric_value(m, "foldserve_draft_tokens_total")), 0.0) << m;
    if (flags[0] == "--drafter") {
      EXPECT_GT(std::stod(metric_value(m, "foldserve_draft_acceptance_rate")), 0.0) << m;
      // The memory budget counts the drafter's K/V pages beside the target's.
      EXPECT_NE(server.stderr_text().find("drafter fortune-draft's K/V pages:"), std::string::npos)
          << server.stderr_text();
    }
  }
  // The request log: drafted requests name their drafts; the "draft": false one (last of each server) none.
  std::ifstream in(log);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);)
    if (json j = json::parse(line); j.value("path", "") == "/v1/chat/completions") lines.push_back(j);
  ASSERT_EQ(lines.size(), 2 * (2 * reqs.size() + 1));
  for (size_t s = 0; s < 2; ++s) {
    const json& last = lines[(s + 1) * (2 * reqs.size() + 1) - 1];
    EXPECT_FALSE(last.dump().find("\"draft\"") != std::string::npos) << last.dump();
    int drafted_lines = 0;
    for (size_t i = s * (2 * reqs.size() + 1); i + 1 < (s + 1) * (2 * reqs.size() + 1); ++i)
      drafted_lines += lines[i].contains("draft") && lines[i]["draft"]["drafted_tokens"].get<int>() > 0 ? 1 : 0;
    // The draft model proposes for every request; n-grams only where the text repeats itself.
    if (s == 0) EXPECT_EQ(drafted_lines, int(2 * reqs.size()));
    else EXPECT_GT(drafted_lines, 0);
  }
  std::filesystem::remove_all(work);
}

TEST(SpeculativeE2E, ADrafterOfAnotherTokenizerStopsTheServerByName) {
  FS_REQUIRE_SHARED(shared);
  ServerProcess server({"--drafter", (shared / "models/tiny-qwen3").string()}, 20);
  EXPECT_FALSE(server.ready());
  EXPECT_NE(server.stderr_text().find("drafter tiny-qwen3 does not share the tokenizer of fortune-demo"),
            std::string::npos)
      << server.stderr_text();
}

}  // namespace
}  // namespace fs::test

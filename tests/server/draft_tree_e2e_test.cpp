// serve --draft-tree W: W outside 1..8, --draft-round-rows out of range, or either without a drafter stops the
// server by name; with a drafter the server says how it drafts and answers with the undrafted server's choices.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "support/fixtures.h"
#include "support/server_process.h"

namespace fs::test {
namespace {

using json = nlohmann::json;

TEST(DraftTreeE2E, AWidthOrRoundRowsOutOfRangeOrNoDrafterIsRefused) {
  FS_REQUIRE_SHARED(shared);
  const std::string drafter = (shared / "models/fortune-draft").string();
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--drafter", drafter, "--draft-tree", "9"}, "--draft-tree must be between 1 and 8"},
           {{"--draft", "ngram", "--draft-tree", "0"}, "--draft-tree must be between 1 and 8"},
           {{"--draft-tree", "2"}, "--draft-tree needs --drafter DIR or --draft ngram"},
           {{"--draft", "ngram", "--draft-round-rows", "-1"}, "--draft-round-rows must be between 0 (no cap) and 2^20"},
           {{"--draft-round-rows", "8"}, "--draft-round-rows needs --drafter DIR or --draft ngram"}}) {
    SCOPED_TRACE(message);
    ServerProcess server(args, 20);
    EXPECT_FALSE(server.ready());
    EXPECT_NE(server.stderr_text().find(message), std::string::npos) << server.stderr_text();
  }
}

TEST(DraftTreeE2E, TreeDraftingServesTheUndraftedChoices) {
  FS_REQUIRE_SHARED(shared);
  const json reference = read_json_file(shared / "reference" / "fortune-demo" / "cases.json");
  std::vector<json> bodies;
  for (const auto& c : reference["cases"])
    for (double temperature : {0.0, 0.8})
      bodies.push_back({{"messages", {{{"role", "user"}, {"content", c["ask"]}}}}, {"max_tokens", 48},
                        {"temperature", temperature}, {"seed", 7}, {"logprobs", true}, {"top_logprobs", 2}});
  auto choices = [&](const ServerProcess& server) {
    std::vector<json> out;
    for (const json& b : bodies) out.push_back(post_json(server.port(), "/v1/chat/completions", b).second["choices"]);
    return out;
  };
  std::vector<json> want;
  {
    ServerProcess plain({"--parallel", "4", "--context", "512"});
    ASSERT_TRUE(plain.ready()) << plain.stderr_text();
    want = choices(plain);
  }
  ServerProcess tree({"--parallel", "4", "--context", "512", "--drafter", (shared / "models/fortune-draft").string(),
                      "--draft-tree", "3"});
  ASSERT_TRUE(tree.ready()) << tree.stderr_text();
  EXPECT_NE(tree.stderr_text().find("trees of width 3"), std::string::npos) << tree.stderr_text();
  const auto got = choices(tree);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i].dump(), want[i].dump()) << "request " << i;
}

}  // namespace
}  // namespace fs::test

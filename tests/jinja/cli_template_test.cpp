// `foldserve template` prints exactly the reference rendering, and fails loudly on bad input.
#include <array>
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "jinja/jinja_test_support.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

struct CliResult {
  int status;
  std::string out;
};

CliResult run_cli(const std::string& args) {
  std::string cmd = foldserve_binary() + " template " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  CliResult r{-1, ""};
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::filesystem::path write_temp(const std::string& name, const std::string& text) {
  auto p = std::filesystem::temp_directory_path() / ("foldserve-cli-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

TEST(CliTemplate, MatchesEveryReferenceConversation) {
  FS_REQUIRE_SHARED(shared);
  for (auto [name, folder] : {std::pair{"qwen3", "models/tiny-qwen3"}, std::pair{"gemma3", "tokenizers/gemma3"},
                              std::pair{"llama3_1", "models/tiny-llama3"}}) {
    ojson ref = read_ordered_json(shared / "reference/tokenizers" / (std::string(name) + ".json"));
    for (const auto& c : ref["chat"]) {
      auto messages = write_temp("messages.json", c["messages"].dump());
      std::string args = "'" + (shared / folder).string() + "' --messages '" + messages.string() + "'";
      if (c.contains("tools")) args += " --tools '" + write_temp("tools.json", c["tools"].dump()).string() + "'";
      if (!c["kwargs"].empty()) args += " --kwargs '" + c["kwargs"].dump() + "'";
      if (!c["add_generation_prompt"].get<bool>()) args += " --no-generation-prompt";
      CliResult r = run_cli(args);
      EXPECT_EQ(r.status, 0) << args;
      EXPECT_EQ(r.out, c["text"].get<std::string>()) << args;
    }
  }
}

TEST(CliTemplate, ErrorsExitNonZero) {
  FS_REQUIRE_SHARED(shared);
  auto alternating = write_temp("bad.json", R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])");
  CliResult r = run_cli("'" + (shared / "tokenizers/gemma3").string() + "' --messages '" + alternating.string() + "'");
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.out, "");
  std::string cmd = foldserve_binary() + " template '" + (shared / "tokenizers/gemma3").string() + "' --messages '" +
                    alternating.string() + "' 2>&1 >/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  std::array<char, 4096> buf;
  std::string err(buf.data(), fread(buf.data(), 1, buf.size(), p));
  pclose(p);
  EXPECT_NE(err.find("Conversation roles must alternate"), std::string::npos) << err;
  EXPECT_NE(run_cli("/nonexistent --messages '" + alternating.string() + "'").status, 0);
  auto broken = write_temp("broken.json", "[{");
  EXPECT_NE(run_cli("'" + (shared / "models/tiny-qwen3").string() + "' --messages '" + broken.string() + "'").status, 0);
  EXPECT_NE(run_cli("'" + (shared / "models/tiny-qwen3").string() + "'").status, 0);
}

}  // namespace
}  // namespace fs::test

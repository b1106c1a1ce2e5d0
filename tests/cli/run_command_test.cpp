// `foldserve run` and friends as a user calls them: the built-in model, --chat, --ids with --json and
// --dump-logits, and clear one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <unistd.h>

#include "core/files.h"
#include "support/fixtures.h"
#include "support/process.h"

namespace fs::test {
namespace {

std::string foldserve(const std::string& args) { return shell_quote(foldserve_binary()) + " " + args; }

TEST(Cli, VersionNamesTheBackendsAndNccl) {
  auto r = run_command(foldserve("--version"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("backends: cpu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nnccl: "), std::string::npos) << r.out;
}

TEST(Cli, ChatWithTheBuiltInModelGivesTheReferenceReplies) {
  FS_REQUIRE_SHARED(shared);
  json cases = read_json_file(shared / "reference/fortune-demo/cases.json");
  for (const auto& c : cases["cases"]) {
    auto r = run_command(foldserve("run --chat --prompt " + shell_quote(c["ask"].get<std::string>()) +
                                   " --temperature 0 --max-tokens 48 --json"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json out = json::parse(r.out);
    EXPECT_EQ(out["prompt_ids"], c["ids"]);
    EXPECT_EQ(out["text"], c["reply"]);
  }
}

TEST(Cli, IdsWithDumpLogitsMatchTheReference) {
  FS_REQUIRE_SHARED(shared);
  auto ref = shared / "reference/tiny-qwen3";
  json cases = read_json_file(ref / "cases.json");
  const auto& c = cases["cases"][0];
  std::string ids;
  for (const auto& id : c["ids"]) ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int>());
  auto dump = std::filesystem::temp_directory_path() / ("fs-logits-" + std::to_string(::getpid()));
  auto r = run_command(foldserve("run " + shell_quote((shared / "models/tiny-qwen3").string()) + " --ids " + ids +
                                 " --max-tokens 1 --temperature 0 --json --device cpu --dump-logits " +
                                 shell_quote(dump.string())));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json out = json::parse(r.out);
  EXPECT_EQ(out["prompt_ids"], c["ids"]);
  EXPECT_EQ(out["ids"][0], c["greedy"][0]["id"]);
  EXPECT_LE(rel_l2(read_f32(dump), read_f32(ref / c["last_logits"]["file"].get<std::string>())), 1e-4);
  std::filesystem::remove(dump);
}

TEST(Cli, ErrorsAreOneClearLineAndANonZeroExit) {
  struct Bad {
    std::string args, expect;
  };
  for (const auto& b : std::vector<Bad>{{"run /nonexistent/model --prompt hi", "/nonexistent/model"},
                                        {"run --prompt hi --bogus", "--bogus"},
                                        {"run --prompt hi --max-tokens many", "--max-tokens"},
                                        {"run --ids 1,x,3", "'x'"},
                                        {"run --prompt hi --device cpu --tensor-parallel 2", "--device cpu"},
                                        {"run --prompt hi --tensor-parallel 0", "--tensor-parallel"},
                                        {"frobnicate", "unknown command"}}) {
    auto r = run_command(foldserve(b.args));
    EXPECT_NE(r.exit_code, 0) << b.args;
    EXPECT_NE(r.err.find(b.expect), std::string::npos) << b.args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(Cli, TensorParallelOverMoreGpusThanTheMachineHasNamesBothCounts) {
  auto r = run_command(foldserve("run --prompt hi --tensor-parallel 64"));
  EXPECT_NE(r.exit_code, 0);
  const bool counts = r.err.find("needs 64 GPUs; this machine has") != std::string::npos;
  const bool no_backend = r.err.find("no CUDA backend") != std::string::npos;
  EXPECT_TRUE(counts || no_backend) << r.err;
}

TEST(Cli, CorruptCheckpointIsNamed) {
  FS_REQUIRE_SHARED(shared);
  auto dir = std::filesystem::temp_directory_path() / ("fs-corrupt-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    std::filesystem::copy_file(shared / "models/tiny-qwen3" / f, dir / f, std::filesystem::copy_options::overwrite_existing);
  std::string bytes = read_file(shared / "models/tiny-qwen3/model.safetensors");
  std::ofstream(dir / "model.safetensors", std::ios::binary).write(bytes.data(), std::streamsize(bytes.size() / 2));
  auto r = run_command(foldserve("run " + shell_quote(dir.string()) + " --ids 1,2 --json"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("model.safetensors"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fs::test

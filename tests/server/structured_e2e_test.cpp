// Structured output end to end: real servers (tiny-qwen3 with the real Qwen3 tokenizer, and fortune-demo) driven by
// tests/server/e2e/structured_output_test.mjs, which validates every reply with ajv and the openai client (skipped
// with a message when node_modules is missing outside CI).
#include <gtest/gtest.h>

#include <filesystem>

#include "support/fixtures.h"
#include "support/process.h"
#include "support/server_process.h"

namespace fs::test {
namespace {

namespace stdfs = std::filesystem;

TEST(StructuredOutputE2E, AjvValidatesEveryConstrainedReply) {
  FS_REQUIRE_SHARED(shared);
  stdfs::path dir = stdfs::path(FOLDSERVE_SOURCE_DIR) / "tests" / "server" / "e2e";
  if (!stdfs::exists(dir / "node_modules" / "ajv") || !stdfs::exists(dir / "node_modules" / "openai")) {
    if (running_in_ci()) FAIL() << "run `npm ci` in " << dir;
    GTEST_SKIP() << "ajv/openai npm packages missing: run `npm ci --prefix " << dir.string() << "`";
  }
  ServerProcess qwen({(shared / "models/tiny-qwen3").string(), "--device", "cpu", "--parallel", "8", "--context", "1024"});
  ASSERT_TRUE(qwen.ready()) << qwen.stderr_text();
  ServerProcess demo({(shared / "models/fortune-demo").string(), "--device", "cpu", "--context", "512"});
  ASSERT_TRUE(demo.ready()) << demo.stderr_text();
  std::string cmd = "cd " + shell_quote(dir.string()) + " && FOLDSERVE_URL=" + shell_quote(qwen.url("")) +
                    " FOLDSERVE_FORTUNE_URL=" + shell_quote(demo.url("")) + " FOLDSERVE_CASES=" +
                    shell_quote((shared / "reference" / "fortune-demo" / "cases.json").string()) +
                    " node structured_output_test.mjs 2>&1; echo \"exit=$?\"";
  std::string out = run_command(cmd).out;
  EXPECT_NE(out.find("exit=0"), std::string::npos) << out;
}

}  // namespace
}  // namespace fs::test

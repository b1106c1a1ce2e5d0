// The chat page at GET / end to end: the real `foldserve serve` (one open, one with --api-key) serves the page
// and tests/server/e2e/chat_page_test.mjs drives it in headless Chromium through playwright-core (skipped with a
// message when node_modules/playwright-core or /usr/bin/chromium is missing, a failure in CI).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "support/fixtures.h"
#include "support/process.h"
#include "support/server_process.h"

namespace fs::test {
namespace {

using json = nlohmann::json;
namespace stdfs = std::filesystem;

constexpr const char* kKey = "chat-page-secret-key";

class ChatPageE2E : public ::testing::Test {
 protected:
  static inline std::unique_ptr<ServerProcess> open_, keyed_;

  static void SetUpTestSuite() {
    if (shared_dir().empty()) return;
    open_ = std::make_unique<ServerProcess>(std::vector<std::string>{"--device", "cpu"});
    keyed_ = std::make_unique<ServerProcess>(std::vector<std::string>{"--device", "cpu", "--api-key", kKey});
  }
  static void TearDownTestSuite() {
    open_.reset();
    keyed_.reset();
  }

  void SetUp() override {
    FS_REQUIRE_SHARED(shared);
    shared_ = shared;
    ASSERT_TRUE(open_->ready()) << open_->stderr_text();
    ASSERT_TRUE(keyed_->ready()) << keyed_->stderr_text();
  }

  stdfs::path shared_;
};

TEST_F(ChatPageE2E, ServesThePageWithoutAKey) {
  std::string page = read_file(stdfs::path(FOLDSERVE_SOURCE_DIR) / "src" / "server" / "chat_page.html");
  for (const ServerProcess* server : {open_.get(), keyed_.get()}) {
    httplib::Client c("127.0.0.1", server->port());
    auto r = c.Get("/");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(r->body, page);
  }
}

TEST_F(ChatPageE2E, ModelsSayWhetherImagesAreAccepted) {
  httplib::Client c("127.0.0.1", open_->port());
  auto r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  json model = json::parse(r->body)["data"][0];
  ASSERT_TRUE(model.contains("vision")) << r->body;
  // fortune-demo's config has no vision tower, so the page hides image attach.
  EXPECT_EQ(model["vision"], read_json_file(shared_ / "models" / "fortune-demo" / "config.json").contains("vision_config"));
}

TEST_F(ChatPageE2E, BrowserChatsStopsReloadsAndAsksForTheKey) {
  stdfs::path dir = stdfs::path(FOLDSERVE_SOURCE_DIR) / "tests" / "server" / "e2e";
  const char* chromium = "/usr/bin/chromium";
  if (!stdfs::exists(dir / "node_modules" / "playwright-core") || !stdfs::exists(chromium)) {
    if (running_in_ci()) FAIL() << "run `npm ci --prefix " << dir.string() << "` and `apt-get install chromium`";
    GTEST_SKIP() << "playwright-core or " << chromium << " missing: run `npm ci --prefix " << dir.string()
                 << "` and `apt-get install chromium`";
  }
  // Screenshots land in the build folder (beside src/foldserve) for a person to look at.
  stdfs::path shots = stdfs::path(foldserve_binary()).parent_path().parent_path() / "chat_page_e2e";
  std::string cmd = "cd " + shell_quote(dir.string()) + " && FOLDSERVE_SHARED=" + shell_quote(shared_.string()) +
                    " FOLDSERVE_SCREENSHOT_DIR=" + shell_quote(shots.string()) + " timeout 300 node chat_page_test.mjs " +
                    shell_quote(open_->url()) + " " + shell_quote(keyed_->url()) + " " + kKey + " 2>&1; echo \"exit=$?\"";
  std::string out = run_command(cmd).out;
  EXPECT_NE(out.find("exit=0\n"), std::string::npos) << out << "\nserver log:\n" << open_->stderr_text();
}

}  // namespace
}  // namespace fs::test

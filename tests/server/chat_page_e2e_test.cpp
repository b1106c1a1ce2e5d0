// The chat page at GET / end to end: the real `foldserve serve` (one open, one with --api-key) serves the page
// and tests/server/e2e/chat_page_test.mjs drives it in headless Chromium through playwright-core (skipped with a
// message when node_modules/playwright-core or /usr/bin/chromium is missing, a failure in CI).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "support/fixtures.h"
#include "support/process.h"

namespace fs::test {
namespace {

using json = nlohmann::json;
namespace stdfs = std::filesystem;

constexpr const char* kKey = "chat-page-secret-key";

// `foldserve serve` on a free port with its output in a log file, ended with SIGTERM by its id.
struct ServedFoldserve {
  pid_t pid = -1;
  int port = 0;
  stdfs::path log;
  std::string error;

  void start(const std::vector<std::string>& flags, const stdfs::path& log_file) {
    log = log_file;
    port = free_loopback_port();
    std::vector<std::string> argv = {foldserve_binary(), "serve", "--port", std::to_string(port), "--device", "cpu"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    pid = ::fork();
    if (pid == 0) {
      std::FILE* out = std::freopen(log.c_str(), "w", stdout);
      (void)out;
      ::dup2(::fileno(stdout), STDERR_FILENO);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::_Exit(127);
    }
    httplib::Client c("127.0.0.1", port);
    for (int i = 0; i < 600; ++i) {
      if (auto r = c.Get("/health"); r && r->status == 200) return;
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    error = "foldserve did not become healthy: " + read_file(log);
  }
  void stop() {
    if (pid <= 0) return;
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

class ChatPageE2E : public ::testing::Test {
 protected:
  static inline ServedFoldserve open_, keyed_;
  static inline stdfs::path work_;

  static void SetUpTestSuite() {
    if (shared_dir().empty()) return;
    work_ = stdfs::temp_directory_path() / ("foldserve_chat_page_" + std::to_string(::getpid()));
    stdfs::create_directories(work_);
    open_.start({}, work_ / "open.log");
    keyed_.start({"--api-key", kKey}, work_ / "keyed.log");
  }
  static void TearDownTestSuite() {
    open_.stop();
    keyed_.stop();
    std::error_code ec;
    if (!work_.empty()) stdfs::remove_all(work_, ec);
  }

  void SetUp() override {
    FS_REQUIRE_SHARED(shared);
    shared_ = shared;
    ASSERT_TRUE(open_.error.empty()) << open_.error;
    ASSERT_TRUE(keyed_.error.empty()) << keyed_.error;
  }

  stdfs::path shared_;
};

TEST_F(ChatPageE2E, ServesThePageWithoutAKey) {
  std::string page = read_file(stdfs::path(FOLDSERVE_SOURCE_DIR) / "src" / "server" / "chat_page.html");
  for (const ServedFoldserve* server : {&open_, &keyed_}) {
    httplib::Client c("127.0.0.1", server->port);
    auto r = c.Get("/");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(r->body, page);
  }
}

TEST_F(ChatPageE2E, ModelsSayWhetherImagesAreAccepted) {
  httplib::Client c("127.0.0.1", open_.port);
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
                    shell_quote(open_.url()) + " " + shell_quote(keyed_.url()) + " " + kKey + " 2>&1; echo \"exit=$?\"";
  std::string out = run_command(cmd).out;
  EXPECT_NE(out.find("exit=0\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace fs::test

// End to end: starts the real `foldserve serve` on a free port and drives it with curl, httplib and the official
// openai npm client (tests/server/e2e; skipped with a message when its node_modules are missing outside CI).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "engine/engine.h"
#include "models/model.h"
#include "support/fixtures.h"
#include "support/process.h"
#include "support/server_process.h"

namespace fs::test {
namespace {

using json = nlohmann::json;
namespace stdfs = std::filesystem;

constexpr const char* kKey = "e2e-secret-key";
constexpr int kParallel = 4;  // streams of the suite's server

struct CurlReply {
  int status = 0;
  std::string body;
};

class ServerE2E : public ::testing::Test {
 protected:
  static inline std::unique_ptr<ServerProcess> server_;
  static inline int port_ = 0;
  static inline stdfs::path work_;

  static void SetUpTestSuite() {
    if (shared_dir().empty()) return;
    work_ = stdfs::temp_directory_path() / ("foldserve_e2e_" + std::to_string(::getpid()));
    stdfs::create_directories(work_);
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{
        "--api-key", kKey, "--request-log", (work_ / "requests.jsonl").string(), "--context", "512",
        "--max-body-bytes", "65536", "--parallel", std::to_string(kParallel)});
    port_ = server_->port();
  }

  static void TearDownTestSuite() {
    server_.reset();
    std::error_code ec;
    if (!work_.empty()) stdfs::remove_all(work_, ec);
  }

  void SetUp() override {
    FS_REQUIRE_SHARED(shared);
    shared_ = shared;
    ASSERT_TRUE(server_ && server_->ready()) << "the server did not become healthy: "
                                             << (server_ ? server_->stderr_text() : "not started");
    cases_ = read_json_file(shared / "reference" / "fortune-demo" / "cases.json")["cases"];
  }

  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

  // curl with the key (unless `key` is empty), a JSON body when given; returns status and body.
  CurlReply curl(const std::string& path, const std::string& body = "", const std::string& key = kKey,
                 const std::string& extra = "") const {
    std::string cmd = "curl -sS -N --max-time 60 -w '\\n%{http_code}' " + extra + " ";
    if (!key.empty()) cmd += "-H " + shell_quote("Authorization: Bearer " + key) + " ";
    if (!body.empty()) {
      std::ofstream(work_ / "body.json") << body;
      cmd += "-H 'Content-Type: application/json' --data-binary @" + shell_quote((work_ / "body.json").string()) + " ";
    }
    std::string out = run_command(cmd + shell_quote(url(path))).out;
    CurlReply r;
    size_t nl = out.rfind('\n');
    if (nl == std::string::npos) return r;
    r.status = std::atoi(out.c_str() + nl + 1);
    r.body = out.substr(0, nl);
    return r;
  }

  static json chat_body(const std::string& ask, bool stream) {
    json b = {{"model", "fortune-demo"},
              {"messages", json::array({{{"role", "user"}, {"content", ask}}})},
              {"temperature", 0},
              {"max_tokens", 48}};
    if (stream) b["stream"] = true;
    return b;
  }

  // The data payloads of an SSE body, "[DONE]" included.
  static std::vector<std::string> sse_data(const std::string& body) {
    std::vector<std::string> out;
    size_t i = 0;
    while ((i = body.find("data: ", i)) != std::string::npos) {
      size_t end = body.find("\n\n", i);
      out.push_back(body.substr(i + 6, end - i - 6));
      i = end;
    }
    return out;
  }

  stdfs::path shared_;
  json cases_;
};

TEST_F(ServerE2E, GreedyChatRepliesEqualTheReference) {
  for (const auto& c : cases_) {
    CurlReply r = curl("/v1/chat/completions", chat_body(c["ask"], false).dump());
    ASSERT_EQ(r.status, 200) << r.body;
    json j = json::parse(r.body);
    EXPECT_EQ(j["object"], "chat.completion");
    EXPECT_EQ(j["choices"][0]["message"]["content"], c["reply"]);
    EXPECT_EQ(j["usage"]["prompt_tokens"], c["ids"].size());
    EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"].is_number(), true);
  }
}

TEST_F(ServerE2E, StreamedGreedyChatRepliesEqualTheReference) {
  for (const auto& c : cases_) {
    json body = chat_body(c["ask"], true);
    body["stream_options"] = {{"include_usage", true}};
    CurlReply r = curl("/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    auto events = sse_data(r.body);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back(), "[DONE]");
    std::string text, finish;
    json usage;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
      json e = json::parse(events[i]);
      EXPECT_EQ(e["object"], "chat.completion.chunk");
      if (e.contains("usage")) usage = e["usage"];
      for (const auto& ch : e["choices"]) {
        if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
        if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
      }
    }
    EXPECT_EQ(text, c["reply"]);
    EXPECT_TRUE(finish == "stop" || finish == "length") << finish;
    EXPECT_EQ(usage["prompt_tokens"], c["ids"].size());
  }
}

TEST_F(ServerE2E, CompletionsTakeTextIdsAndLists) {
  const auto& c = cases_[0];
  json body = {{"prompt", c["ids"]}, {"temperature", 0}, {"max_tokens", 48}};
  CurlReply r = curl("/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], c["reply"]);

  body = {{"prompt", json::array({c["text"], cases_[1]["ids"]})}, {"temperature", 0}, {"max_tokens", 48},
          {"logprobs", 2}};
  r = curl("/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["text"], c["reply"]);
  EXPECT_EQ(j["choices"][1]["text"], cases_[1]["reply"]);
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"].size(), j["choices"][0]["logprobs"]["token_logprobs"].size());
  EXPECT_EQ(j["choices"][0]["logprobs"]["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(j["usage"]["prompt_tokens"], c["ids"].size() + cases_[1]["ids"].size());
}

TEST_F(ServerE2E, StopStringsAndLengthLimit) {
  std::string reply = cases_[0]["reply"];
  json body = chat_body(cases_[0]["ask"], false);
  body["stop"] = "--";
  CurlReply r = curl("/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], reply.substr(0, reply.find("--")));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");

  body = chat_body(cases_[0]["ask"], false);
  body["max_tokens"] = 3;
  j = json::parse(curl("/v1/chat/completions", body.dump()).body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(reply.rfind(j["choices"][0]["message"]["content"].get<std::string>(), 0), 0u);
}

TEST_F(ServerE2E, ModelsAndHealth) {
  CurlReply r = curl("/v1/models");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["data"][0]["id"], "fortune-demo");
  EXPECT_EQ(curl("/v1/models/fortune-demo").status, 200);
  EXPECT_EQ(curl("/v1/models/other").status, 404);
  EXPECT_EQ(curl("/health", "", "").status, 200);
}

// The memory report names the round size: kGpuRoundTokens rows on a GPU, the engine's own default (plus a logits
// row per stream) on the CPU, and --round-tokens wherever it is given.
TEST_F(ServerE2E, RoundsAreSizedForTheDeviceUnlessGiven) {
  const int default_rows = cuda_backend_available() ? kGpuRoundTokens : EngineOptions{}.round_tokens + kParallel;
  EXPECT_NE(server_->stderr_text().find("scratch for rounds of " + std::to_string(default_rows) + " rows"),
            std::string::npos)
      << server_->stderr_text();
  ServerProcess given({"--context", "512", "--parallel", std::to_string(kParallel), "--round-tokens", "384"});
  ASSERT_TRUE(given.ready()) << given.stderr_text();
  const int given_rows = cuda_backend_available() ? 384 : 384 + kParallel;
  EXPECT_NE(given.stderr_text().find("scratch for rounds of " + std::to_string(given_rows) + " rows"),
            std::string::npos)
      << given.stderr_text();
}

TEST_F(ServerE2E, ErrorsHaveOpenAiShapeAndStatus) {
  struct Case {
    std::string path, body;
    int status;
    std::string param;
  };
  std::string big(70000, 'x');
  std::vector<Case> cases = {
      {"/v1/chat/completions", "{\"messages\": [", 400, ""},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"top_p":"high"})", 400, "top_p"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"model":"gpt-4"})", 404, ""},
      {"/v1/completions", R"({"prompt":[1,2,99999]})", 400, "prompt"},
      {"/v1/completions", json({{"prompt", std::vector<int>(600, 5)}}).dump(), 400, "prompt"},
      {"/v1/completions", "{\"prompt\":\"" + big + "\"}", 413, ""},
      {"/v1/unknown", "{}", 404, ""},
  };
  for (const auto& c : cases) {
    CurlReply r = curl(c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.path << " " << c.body.substr(0, 80) << " → " << r.body;
    json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    for (const char* k : {"message", "type", "param", "code"}) EXPECT_TRUE(j["error"].contains(k)) << r.body;
    if (!c.param.empty()) {
      EXPECT_EQ(j["error"]["param"], c.param) << r.body;
    }
  }
  // The server is still healthy and answering.
  EXPECT_EQ(curl("/v1/models").status, 200);
}

TEST_F(ServerE2E, KeysAreRequiredExceptForHealth) {
  EXPECT_EQ(curl("/v1/models", "", "").status, 401);
  EXPECT_EQ(curl("/v1/models", "", "wrong").status, 401);
  EXPECT_EQ(curl("/metrics", "", "").status, 401);
  EXPECT_EQ(curl("/v1/chat/completions", chat_body("hi", false).dump(), "").status, 401);
  EXPECT_EQ(curl("/v1/models", "", "", std::string("-H ") + shell_quote(std::string("x-api-key: ") + kKey)).status, 200);
  CurlReply r = curl("/v1/models", "", "");
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "invalid_api_key");
}

TEST_F(ServerE2E, ClientLeavingMidStreamFreesItsStream) {
  httplib::Client c("127.0.0.1", port_);
  c.set_bearer_token_auth(kKey);
  json body = {{"prompt", "The"}, {"max_tokens", 400}, {"temperature", 1.0}, {"seed", 3}, {"stream", true}};
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = {{"Authorization", std::string("Bearer ") + kKey}};
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
  c.send(req);
  EXPECT_GE(chunks, 3);
  // The engine ends the abandoned stream: no active streams remain shortly after.
  bool freed = false;
  for (int i = 0; i < 100 && !freed; ++i) {
    std::string m = curl("/metrics").body;
    freed = m.find("foldserve_active_streams 0\n") != std::string::npos &&
            m.find("foldserve_http_generations_active 0\n") != std::string::npos;
    if (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(freed);
}

TEST_F(ServerE2E, MetricsAndRequestLog) {
  ASSERT_EQ(curl("/v1/chat/completions", chat_body("Hi", false).dump()).status, 200);
  std::string m = curl("/metrics").body;
  for (const char* name : {"foldserve_requests_total{route=\"/v1/chat/completions\",status=\"200\"}",
                           "foldserve_time_to_first_token_seconds_count", "foldserve_inter_token_latency_seconds_bucket",
                           "foldserve_queue_depth", "foldserve_active_streams", "foldserve_kv_pages_used",
                           "foldserve_kv_pages_free", "foldserve_rounds_total", "foldserve_rows_per_round"})
    EXPECT_NE(m.find(name), std::string::npos) << name;
  // Every log line is whole JSON with id, status and times; the chat lines carry token counts.
  std::ifstream in(work_ / "requests.jsonl");
  std::string line;
  int chat_lines = 0, lines = 0;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << line;
    ++lines;
    for (const char* k : {"id", "status", "received_unix_ms", "duration_ms", "path"}) EXPECT_TRUE(j.contains(k)) << line;
    if (j["path"] == "/v1/chat/completions" && j["status"] == 200) {
      ++chat_lines;
      EXPECT_TRUE(j.contains("prompt_tokens") && j.contains("completion_tokens")) << line;
    }
  }
  EXPECT_GT(lines, 0);
  EXPECT_GT(chat_lines, 0);
}

TEST_F(ServerE2E, OpenAiNpmClient) {
  stdfs::path dir = stdfs::path(FOLDSERVE_SOURCE_DIR) / "tests" / "server" / "e2e";
  if (!stdfs::exists(dir / "node_modules" / "openai")) {
    if (running_in_ci()) FAIL() << "run `npm ci` in " << dir;
    GTEST_SKIP() << "openai npm package missing: run `npm ci --prefix " << dir.string() << "`";
  }
  std::string cmd = "cd " + shell_quote(dir.string()) + " && FOLDSERVE_URL=" + shell_quote(url("")) + " FOLDSERVE_KEY=" + kKey +
                    " FOLDSERVE_CASES=" + shell_quote((shared_ / "reference" / "fortune-demo" / "cases.json").string()) +
                    " node openai_client_test.mjs 2>&1; echo \"exit=$?\"";
  std::string out = run_command(cmd).out;
  EXPECT_NE(out.find("exit=0"), std::string::npos) << out;
}

}  // namespace
}  // namespace fs::test

// Hostile and careless clients against the real server: nested and oversized bodies, chunked bombs, slow and idle
// connections, pipelining, bad framing, a taken port, a full queue and a drain on SIGTERM. After each, the server
// still answers.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "support/fixtures.h"
#include "support/process.h"
#include "support/server_process.h"

namespace fs::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kKey = "hardening-key";
const std::string kHealth = "GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

// A keyed POST on a connection the server closes after answering.
std::string post(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
  const std::string key = "Authorization: Bearer " + std::string(kKey) + "\r\n";
  return raw_post(path, body, key + "Connection: close\r\n" + extra_headers);
}

class HttpHardening : public ::testing::Test {
 protected:
  void SetUp() override {
    FS_REQUIRE_SHARED(shared);
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{
        "--api-key", kKey, "--max-body-bytes", "65536", "--header-timeout-ms", "1500", "--prompt-cache-gib", "0",
        "--max-connections-per-client", "64"});
    ASSERT_TRUE(server_->ready()) << server_->stderr_text();
  }
  bool healthy() const { return first_status(raw_exchange(server_->port(), kHealth)) == 200; }

  std::unique_ptr<ServerProcess> server_;
};

TEST_F(HttpHardening, HundredThousandNestedArraysAre400AndTheServerStaysUp) {
  const size_t depth = 100000;
  std::string body = "{\"x\":" + std::string(depth, '[') + std::string(depth, ']') +
                     ",\"model\":\"fortune-demo\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  ServerProcess big({"--api-key", kKey, "--max-body-bytes", "1048576", "--prompt-cache-gib", "0"});
  ASSERT_TRUE(big.ready()) << big.stderr_text();
  std::string reply = raw_exchange(big.port(), post("/v1/chat/completions", body));
  EXPECT_EQ(first_status(reply), 400) << reply.substr(0, 300);
  EXPECT_NE(reply.find("deeper than"), std::string::npos);
  EXPECT_EQ(first_status(raw_exchange(big.port(), kHealth)), 200);
}

TEST_F(HttpHardening, ChunkedBodiesStopAtTheLimitAsTheyArriveAndKeysAreCheckedFirst) {
  const size_t before = server_->rss_bytes();
  auto send_chunked = [&](const std::string& key, size_t mib) {
    std::string head = "POST /v1/completions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + key +
                       "\r\nTransfer-Encoding: chunked\r\n\r\n";
    std::string chunk = "100000\r\n" + std::string(1 << 20, 'a') + "\r\n";
    std::string bytes = head;
    for (size_t i = 0; i < mib; ++i) bytes += chunk;
    return raw_exchange(server_->port(), bytes, 3000);
  };
  EXPECT_EQ(first_status(send_chunked(kKey, 64)), 413);
  EXPECT_EQ(first_status(send_chunked("wrong", 64)), 401);
  const size_t after = server_->rss_bytes();
  EXPECT_LT(after, before + (50u << 20)) << "resident memory grew by " << (after - before) / (1 << 20) << " MiB";
  EXPECT_TRUE(healthy());
}

TEST_F(HttpHardening, SlowAndIdleConnectionsHoldNoThreadAndHealthStaysQuick) {
  std::vector<int> slow;
  for (int i = 0; i < 300; ++i) {
    int fd = connect_loopback(server_->port());
    if (fd < 0) continue;
    ::send(fd, "P", 1, MSG_NOSIGNAL);
    slow.push_back(fd);
  }
  double worst_ms = 0;
  for (int round = 0; round < 20; ++round) {
    for (int fd : slow) ::send(fd, "O", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    auto t = Clock::now();
    EXPECT_EQ(first_status(raw_exchange(server_->port(), kHealth)), 200);
    worst_ms = std::max(worst_ms, std::chrono::duration<double, std::milli>(Clock::now() - t).count());
  }
  for (int fd : slow) ::close(fd);
  EXPECT_LT(worst_ms, 1000.0);
}

TEST_F(HttpHardening, AHeadThatDoesNotArriveInTimeGets408) {
  auto t = Clock::now();
  std::string reply = raw_exchange(server_->port(), "GET /health HTTP/1.1\r\nHost: t\r\n", 5000);
  EXPECT_EQ(first_status(reply), 408) << reply;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t).count(), 4.5);
}

TEST_F(HttpHardening, PipelinedRequestsAreAllAnsweredInOrder) {
  std::string three = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n"
                      "GET /v1/models HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + std::string(kKey) + "\r\n\r\n"
                      "GET /nowhere HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  std::string reply = raw_exchange(server_->port(), three);
  size_t first = reply.find("HTTP/1.1 200"), second = reply.find("HTTP/1.1 200", first + 1),
         third = reply.find("HTTP/1.1 404");
  ASSERT_NE(first, std::string::npos) << reply;
  ASSERT_NE(second, std::string::npos) << reply;
  ASSERT_NE(third, std::string::npos) << reply;
  EXPECT_LT(second, third);
  EXPECT_NE(reply.find("fortune-demo"), std::string::npos);
}

TEST_F(HttpHardening, BadFramingAndWrongMethodsGetTheirStatus) {
  auto status_of = [&](const std::string& bytes) { return first_status(raw_exchange(server_->port(), bytes)); };
  EXPECT_EQ(status_of("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"
                      "hello!"),
            400);
  auto t = Clock::now();
  EXPECT_EQ(status_of("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: -5\r\n\r\n"), 400);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t).count(), 1.5);
  std::string reply = raw_exchange(server_->port(), "DELETE /v1/models HTTP/1.1\r\nHost: t\r\nAuthorization: "
                                                    "Bearer " + std::string(kKey) + "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(first_status(reply), 405);
  EXPECT_NE(reply.find("allow: GET"), std::string::npos) << reply;
  EXPECT_EQ(status_of("GET /v1/chat/completions HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"), 405);
  EXPECT_EQ(status_of(post("/v1/completions", "", "Content-Length: 99999999\r\n")), 400);
  EXPECT_TRUE(healthy());
}

TEST_F(HttpHardening, ASecondServerOnTheSamePortIsRefusedNamingIt) {
  const std::string port = std::to_string(server_->port());
  CommandResult r = run_command(shell_quote(foldserve_binary()) + " serve --port " + port);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("127.0.0.1:" + port), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("already in use"), std::string::npos) << r.err;
  EXPECT_TRUE(healthy());
}

TEST_F(HttpHardening, ConnectionsOverTheClientCapGiveWayOldestFirst) {
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) {
    int fd = connect_loopback(server_->port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  EXPECT_TRUE(healthy());
  // The oldest idle connection was closed by the server to make room.
  char byte;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(::recv(idle.front(), &byte, 1, MSG_DONTWAIT), 0);
  for (int fd : idle) ::close(fd);
}

// A random-weight model rarely says eos, so its replies run as long as asked.
class HttpDrain : public ::testing::Test {
 protected:
  void SetUp() override {
    FS_REQUIRE_SHARED(shared);
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{
        (shared / "models" / "tiny-qwen3").string(), "--parallel", "1", "--queue-limit", "1", "--drain-seconds", "1",
        "--prompt-cache-gib", "0", "--api-key", kKey});
    ASSERT_TRUE(server_->ready()) << server_->stderr_text();
  }
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(HttpDrain, AFullQueueAnswers429WithRetryAfter) {
  const std::string long_body = R"({"prompt":"Once upon a time","max_tokens":4000,"stream":true})";
  // Waits until /metrics shows `gauge` at `value`; a probe sent before that could take the queue's place itself.
  const std::string get_metrics = "GET /metrics HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + std::string(kKey) +
                                  "\r\nConnection: close\r\n\r\n";
  const auto wait_for = [&](const std::string& gauge, int value) {
    const std::string line = "\n" + gauge + " " + std::to_string(value) + "\n";
    for (int i = 0; i < 500; ++i) {
      if (raw_exchange(server_->port(), get_metrics).find(line) != std::string::npos)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  // One stream decodes, one waits in the queue; a third finds the queue full.
  std::thread busy([&] { raw_exchange(server_->port(), post("/v1/completions", long_body), 4000); });
  const bool running = wait_for("foldserve_active_streams", 1);
  std::thread waiting([&] { raw_exchange(server_->port(), post("/v1/completions", long_body), 4000); });
  const bool queued = wait_for("foldserve_queue_depth", 1);
  const std::string reply = raw_exchange(server_->port(), post("/v1/completions", R"({"prompt":"hi","max_tokens":4})"));
  EXPECT_TRUE(running);
  EXPECT_TRUE(queued);
  EXPECT_EQ(first_status(reply), 429) << reply;
  EXPECT_NE(reply.find("retry-after: 1"), std::string::npos) << reply;
  server_->stop(SIGKILL);
  busy.join();
  waiting.join();
}

TEST_F(HttpDrain, SigtermLetsStreamsEndCleanlyThenExitsZero) {
  std::string stream;
  std::thread client([&] {
    stream = raw_exchange(server_->port(),
                          post("/v1/completions", R"({"prompt":"Once upon a time","max_tokens":4000,"stream":true})"),
                          5000);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(server_->pid(), SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::string health = raw_exchange(server_->port(), kHealth);
  EXPECT_EQ(first_status(health), 503) << health;
  EXPECT_NE(health.find("draining"), std::string::npos) << health;
  std::string refused = raw_exchange(server_->port(), post("/v1/completions", R"({"prompt":"hi"})"));
  EXPECT_EQ(first_status(refused), 503) << refused;
  EXPECT_EQ(server_->stop(0, 20), 0);
  client.join();
  EXPECT_NE(stream.find("\"finish_reason\":\"abort\""), std::string::npos) << stream.substr(0, 600);
  EXPECT_NE(stream.find("data: [DONE]"), std::string::npos);
  EXPECT_NE(stream.find("\r\n0\r\n\r\n"), std::string::npos) << "the chunked stream did not end properly";
}

}  // namespace
}  // namespace fs::test

// Image work never blocks text (`foldserve serve --vision` on tiny-qwen2.5-vl, CPU tower): text requests are answered
// quickly while a large image encodes; a client that leaves mid-encode frees the tower for the next image; SIGTERM
// during an encode exits 0 within the drain time; an image over the measured budget is a 400 naming the limit.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <regex>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "io/hf_config.h"
#include "models/vision_tower_config.h"
#include "support/fixtures.h"
#include "support/media.h"
#include "support/server_process.h"
#include "vision/image_budget.h"

namespace fs::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono;

// A side×side RGB pattern written as PNG by libpng.
std::string png_of_side(int side) {
  std::vector<uint8_t> pixels(size_t(side) * size_t(side) * 3);
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x) {
      uint8_t* p = &pixels[(size_t(y) * size_t(side) + size_t(x)) * 3];
      p[0] = uint8_t(x * 7 + y * 3), p[1] = uint8_t(x ^ y), p[2] = uint8_t(y * 5);
    }
  return encode_png_rgb(side, side, pixels);
}

json image_body(const std::string& png) {
  return {{"messages",
           {{{"role", "user"},
             {"content",
              {{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + base64(png)}}}},
               {{"type", "text"}, {"text", "What is it?"}}}}}}},
          {"max_tokens", 2}};
}

const json kTextBody = {{"messages", {{{"role", "user"}, {"content", "Tell me about computers."}}}},
                        {"max_tokens", 16}, {"temperature", 0}};

// The server's start-up budget line: admitted pixels and the measured GFLOP/s (0 when the line says no speed).
struct PrintedBudget {
  int64_t pixels = 0;
  double gflops = 0;
};

PrintedBudget printed_budget(const std::string& log) {
  PrintedBudget b;
  std::smatch m;
  if (std::regex_search(log, m, std::regex(R"(image budget: at most (\d+) pixels)"))) b.pixels = std::stoll(m[1]);
  if (std::regex_search(log, m, std::regex(R"(measured ([0-9.]+) GFLOP/s)"))) b.gflops = std::stod(m[1]);
  return b;
}

class VisionLoadE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    FS_REQUIRE_SHARED(shared);
    model_ = (shared / "models" / "tiny-qwen2.5-vl").string();
    config_ = vision::VisionTowerConfig::from_json(load_model_config(model_).vision, model_);
  }

  std::vector<std::string> flags(std::vector<std::string> more) const {
    std::vector<std::string> f = {model_, "--vision", "--device", "cpu", "--context", "65536", "--parallel", "2",
                                  "--prompt-cache-gib", "0.05"};
    f.insert(f.end(), more.begin(), more.end());
    return f;
  }

  // The side of a square image whose encode the server's measured speed puts at about `seconds`.
  int side_for_seconds(const ServerProcess& s, double seconds) const {
    const PrintedBudget b = printed_budget(s.stderr_text() + s.stdout_text());
    EXPECT_GT(b.gflops, 0) << s.stderr_text();
    vision::TowerSpeed speed;
    speed.flops_per_second = b.gflops * 1e9;
    const int64_t patches = vision::patches_within(config_, speed, seconds, int64_t(1) << 40);
    return int(std::sqrt(double(patches))) * config_.patch_size;
  }

  std::string model_;
  vision::VisionTowerConfig config_;
};

TEST_F(VisionLoadE2E, TextIsAnsweredWhileAnImageEncodesAndALeavingClientFreesTheTower) {
  ServerProcess server(flags({"--max-image-seconds", "600"}));
  ASSERT_TRUE(server.ready()) << server.stderr_text();
  const int side = side_for_seconds(server, 60);
  // The big image's request goes over a raw socket, so the test can leave mid-encode.
  const int fd = connect_loopback(server.port());
  ASSERT_GE(fd, 0);
  const std::string request = raw_post("/v1/chat/completions", image_body(png_of_side(side)).dump());
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
  std::this_thread::sleep_for(milliseconds(1500));
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  for (int i = 0; i < 3; ++i) {
    const auto start = steady_clock::now();
    auto r = client.Post("/v1/chat/completions", kTextBody.dump(), "application/json");
    const double took = duration<double>(steady_clock::now() - start).count();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_LT(took, 3.0) << "text request " << i << " waited behind a " << side << "x" << side << " image";
  }
  char byte;
  EXPECT_EQ(::recv(fd, &byte, 1, MSG_DONTWAIT), -1) << "the image request ended before the text requests did";
  ::close(fd);
  // With the big encode released, the next image is served promptly (its ~60 s encode would come first otherwise).
  const auto start = steady_clock::now();
  auto r = client.Post("/v1/chat/completions", image_body(png_of_side(112)).dump(), "application/json");
  const double took = duration<double>(steady_clock::now() - start).count();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_LT(took, 15.0);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("\nfoldserve_image_encodes_cancelled_total 1\n"), std::string::npos) << metrics->body;
  EXPECT_EQ(server.stop(SIGTERM), 0);
}

TEST_F(VisionLoadE2E, SigtermDuringAnEncodeExitsZeroWithinTheDrainTime) {
  const int drain_seconds = 2;
  ServerProcess server(flags({"--max-image-seconds", "600", "--drain-seconds", std::to_string(drain_seconds)}));
  ASSERT_TRUE(server.ready()) << server.stderr_text();
  const int side = side_for_seconds(server, 60);
  const int fd = connect_loopback(server.port());
  ASSERT_GE(fd, 0);
  const std::string request = raw_post("/v1/chat/completions", image_body(png_of_side(side)).dump());
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
  std::this_thread::sleep_for(milliseconds(1500));
  const auto start = steady_clock::now();
  EXPECT_EQ(server.stop(SIGTERM, 30), 0);
  const double took = duration<double>(steady_clock::now() - start).count();
  EXPECT_LT(took, drain_seconds + 3.0);
  std::string answer(4096, '\0');
  const ssize_t n = ::recv(fd, answer.data(), answer.size(), 0);
  ::close(fd);
  ASSERT_GT(n, 0);
  answer.resize(size_t(n));
  EXPECT_EQ(first_status(answer), 503) << answer;
}

TEST_F(VisionLoadE2E, AnImageOverTheMeasuredBudgetIsRefusedNamingTheLimit) {
  ServerProcess server(flags({"--max-image-seconds", "1"}));
  ASSERT_TRUE(server.ready()) << server.stderr_text();
  const PrintedBudget b = printed_budget(server.stderr_text() + server.stdout_text());
  ASSERT_GT(b.pixels, 0) << server.stderr_text();
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  const int over = int(std::sqrt(double(b.pixels))) + 4 * config_.patch_size * config_.spatial_merge_size;
  auto r = client.Post("/v1/chat/completions", image_body(png_of_side(over)).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  const json e = json::parse(r->body)["error"];
  EXPECT_EQ(e["param"], "messages[0].content[0]");
  const std::string message = e["message"];
  EXPECT_NE(message.find("--max-image-seconds 1"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(b.pixels)), std::string::npos) << message;
  const int under = int(std::sqrt(double(b.pixels))) - 2 * config_.patch_size * config_.spatial_merge_size;
  r = client.Post("/v1/chat/completions", image_body(png_of_side(under)).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(server.stop(SIGTERM), 0);
}

}  // namespace
}  // namespace fs::test

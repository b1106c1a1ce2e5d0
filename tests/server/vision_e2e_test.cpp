// Image input end to end: the real `foldserve serve --vision` on tiny-qwen2.5-vl answers the reference image
// prompts with the reference greedy ids over HTTP, refuses bad images, vision-off and text-only models with a 400,
// fetches http images only with --media-allow-local, and reuses an image prefix from the prompt cache only for
// the same image.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
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
#include "models/model.h"
#include "support/fixtures.h"
#include "support/media.h"
#include "support/process.h"
#include "support/server_process.h"
#include "vision/image.h"
#include "vision/media_fetch.h"

namespace fs::test {
namespace {

using json = nlohmann::json;
namespace stdfs = std::filesystem;

// A child process started with execvp, stdout/stderr to files, ended with SIGTERM by its id.
struct Child {
  pid_t pid = -1;
  stdfs::path err_file;

  void start(std::vector<std::string> argv, const stdfs::path& log) {
    err_file = log;
    pid = ::fork();
    if (pid == 0) {
      std::FILE* out = std::freopen(log.c_str(), "w", stdout);
      (void)out;
      ::dup2(::fileno(stdout), STDERR_FILENO);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      std::_Exit(127);
    }
  }
  bool running() {
    int status = 0;
    return pid > 0 && ::waitpid(pid, &status, WNOHANG) == 0;
  }
  void stop() {
    if (pid <= 0) return;
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
  }
  std::string log() const {
    std::ifstream in(err_file);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
};

// The backend the servers run on: the GPU where there is one, else the CPU.
std::string test_device() { return cuda_backend_available() ? "cuda" : "cpu"; }

// Reference greedy ids are compared up to the first step whose margin is below this: f32 activations on the CPU,
// bf16 activations on the GPU (the threshold of the CUDA reference tests).
double near_tie_margin() { return test_device() == "cuda" ? 5e-2 : 1e-3; }

// A foldserve server on a free port, healthy or with the reason it is not.
// `foldserve serve` with the flags every server of these tests shares.
struct ServerUnderTest {
  std::unique_ptr<ServerProcess> process;

  void start(const std::vector<std::string>& flags) {
    // Image admission follows the tower's speed measured at start; these tests are about replies, not admission
    // (vision_load_e2e_test.cpp), so a loaded or sanitized machine must not shrink the admitted image size.
    std::vector<std::string> args = {"--context", "1024", "--parallel", "2", "--prompt-cache-gib", "0.05",
                                     "--max-image-seconds", "600", "--device", test_device()};
    args.insert(args.end(), flags.begin(), flags.end());
    process = std::make_unique<ServerProcess>(args);
  }
  int port() const { return process->port(); }
  // POSTs a JSON body; returns status and parsed body (discarded when not JSON).
  std::pair<int, json> post(const std::string& path, const json& body) const {
    return post_json(port(), path, body, 120);
  }
  std::pair<int, json> chat(const json& body) const { return post("/v1/chat/completions", body); }
};

// An RGB image written as PNG by libpng.
std::string encode_png(const vision::RgbImage& img) { return encode_png_rgb(img.width, img.height, img.pixels); }

class VisionServerE2E : public ::testing::Test {
 protected:
  static inline stdfs::path work_;
  static inline ServerUnderTest vision_, local_, vision_off_, text_only_;

  static void SetUpTestSuite() {
    auto shared = shared_dir();
    if (shared.empty()) return;
    work_ = stdfs::temp_directory_path() / ("foldserve_vision_e2e_" + std::to_string(::getpid()));
    stdfs::create_directories(work_);
    const std::string vl = (shared / "models" / "tiny-qwen2.5-vl").string();
    vision_.start({vl, "--vision"});
    local_.start({vl, "--vision", "--media-allow-local"});
    vision_off_.start({vl});
    text_only_.start({"--vision"});
  }

  static void TearDownTestSuite() {
    for (auto* s : {&vision_, &local_, &vision_off_, &text_only_}) s->process.reset();
    std::error_code ec;
    if (!work_.empty()) stdfs::remove_all(work_, ec);
  }

  void SetUp() override {
    FS_REQUIRE_SHARED(shared);
    shared_ = shared;
    for (auto* s : {&vision_, &local_, &vision_off_, &text_only_})
      ASSERT_TRUE(s->process && s->process->ready()) << (s->process ? s->process->stderr_text() : "not started");
    cases_ = read_json_file(shared / "reference" / "tiny-qwen2.5-vl" / "cases.json");
  }

  std::string image_bytes(const std::string& file) const { return read_file(shared_ / "images" / file); }

  // A reference prompt's messages with each {"type": "image", "image": FILE} as an image_url part with `url(FILE)`.
  template <class UrlOf>
  static json messages_with_urls(const json& prompt, UrlOf url_of) {
    json msgs = prompt["messages"];
    for (auto& m : msgs) {
      if (!m["content"].is_array()) continue;
      for (auto& part : m["content"]) {
        if (part["type"] != "image") continue;
        part = {{"type", "image_url"}, {"image_url", {{"url", url_of(part["image"].get<std::string>())}}}};
      }
    }
    return msgs;
  }

  static json greedy_body(json messages, size_t max_tokens) {
    return {{"messages", std::move(messages)}, {"temperature", 0}, {"max_tokens", max_tokens},
            {"logprobs", true}, {"return_tokens_as_token_ids", true}};
  }

  static std::vector<int32_t> reply_ids(const json& reply) {
    std::vector<int32_t> ids;
    for (const auto& t : reply["choices"][0]["logprobs"]["content"]) {
      std::string tok = t["token"];
      EXPECT_EQ(tok.rfind("token_id:", 0), 0u) << tok;
      ids.push_back(int32_t(std::stol(tok.substr(9))));
    }
    return ids;
  }

  // The reply's ids equal the reference greedy ids up to the first near-tie (margin < near_tie_margin()).
  static void expect_reference_greedy(const json& prompt, const json& reply) {
    auto want = prompt["greedy"].get<std::vector<int32_t>>();
    auto margins = prompt["greedy_margins"].get<std::vector<double>>();
    auto got = reply_ids(reply);
    size_t n = 0;
    while (n < want.size() && margins[n] >= near_tie_margin()) ++n;
    ASSERT_GE(got.size(), n);
    EXPECT_GE(n, 1u);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;
    EXPECT_EQ(reply["usage"]["prompt_tokens"], prompt["ids"].size());
  }

  json one_image_messages(const std::string& url) const {
    json one = cases_["prompts"][0];
    return messages_with_urls(one, [&](const std::string&) { return url; });
  }

  static int first_image_pad(const json& prompt, int32_t pad) {
    const auto& ids = prompt["ids"];
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i].get<int32_t>() == pad) return int(i);
    return -1;
  }

  stdfs::path shared_;
  json cases_;
};

TEST_F(VisionServerE2E, ReferencePromptsGiveTheReferenceGreedyIds) {
  for (const auto& prompt : cases_["prompts"]) {
    SCOPED_TRACE(prompt["name"].get<std::string>());
    json msgs = messages_with_urls(prompt, [&](const std::string& f) { return data_uri(image_bytes(f), "image/png"); });
    auto [status, reply] = vision_.chat(greedy_body(msgs, prompt["greedy"].size()));
    ASSERT_EQ(status, 200) << reply.dump();
    expect_reference_greedy(prompt, reply);
  }
}

TEST_F(VisionServerE2E, StreamedReferencePromptsGiveTheReferenceGreedyIds) {
  for (const auto& prompt : cases_["prompts"]) {
    SCOPED_TRACE(prompt["name"].get<std::string>());
    json msgs = messages_with_urls(prompt, [&](const std::string& f) { return data_uri(image_bytes(f), "image/png"); });
    json body = greedy_body(msgs, prompt["greedy"].size());
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    httplib::Client c("127.0.0.1", vision_.port());
    c.set_read_timeout(120, 0);
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    // Gathers the chunks' logprobs and usage into the shape of a whole reply.
    json whole = {{"choices", {{{"logprobs", {{"content", json::array()}}}}}}};
    for (size_t i = 0; (i = r->body.find("data: ", i)) != std::string::npos;) {
      size_t end = r->body.find("\n\n", i);
      json e = json::parse(r->body.substr(i + 6, end - i - 6), nullptr, false);
      i = end;
      if (e.is_discarded()) continue;
      if (e.contains("usage")) whole["usage"] = e["usage"];
      for (const auto& ch : e["choices"])
        if (ch["logprobs"].is_object())
          for (const auto& t : ch["logprobs"]["content"]) whole["choices"][0]["logprobs"]["content"].push_back(t);
    }
    expect_reference_greedy(prompt, whole);
  }
}

TEST_F(VisionServerE2E, BrokenAndUnsupportedImagesAre400) {
  std::string png = image_bytes("grid224x168.png");
  const std::string gif = std::string("GIF89a\x01\x00\x01\x00\x80\x00\x00", 13) + std::string(6, '\0') + ";";
  struct Bad {
    std::string url, expect;
  } bad[] = {{data_uri(png.substr(0, png.size() / 2), "image/png"), "PNG"},
             {data_uri(gif, "image/gif"), "GIF"},
             {data_uri("not an image at all", "image/png"), "JPEG, PNG or WebP"},
             {"data:image/png;base64,@@@@", "base64"},
             {"ftp://example.com/a.png", "http"}};
  for (const auto& b : bad) {
    auto [status, reply] = vision_.chat({{"messages", one_image_messages(b.url)}, {"max_tokens", 2}});
    EXPECT_EQ(status, 400) << b.url.substr(0, 60) << " " << reply.dump();
    EXPECT_EQ(reply["error"]["param"], "messages[0].content[0]") << reply.dump();
    EXPECT_NE(reply["error"]["message"].get<std::string>().find(b.expect), std::string::npos) << reply.dump();
  }
  // Several images: the first broken one in order is named, whether it comes after a good one (prepared while the
  // good one encodes) or before another broken one.
  const std::string good = data_uri(png, "image/png");
  const std::string truncated = data_uri(png.substr(0, png.size() / 2), "image/png");
  const std::string unsupported = data_uri(gif, "image/gif");
  struct Several {
    std::vector<std::string> urls;
    std::string param, expect;
  } several[] = {{{good, truncated}, "messages[0].content[1]", "PNG"},
                 {{good, unsupported, truncated}, "messages[0].content[1]", "GIF"},
                 {{truncated, unsupported}, "messages[0].content[0]", "PNG"}};
  for (const auto& c : several) {
    json content = json::array();
    for (const auto& url : c.urls) content.push_back({{"type", "image_url"}, {"image_url", {{"url", url}}}});
    content.push_back({{"type", "text"}, {"text", "What is in them?"}});
    auto [status, reply] = vision_.chat({{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", 2}});
    EXPECT_EQ(status, 400) << reply.dump();
    EXPECT_EQ(reply["error"]["param"], c.param) << reply.dump();
    EXPECT_NE(reply["error"]["message"].get<std::string>().find(c.expect), std::string::npos) << reply.dump();
  }
  // The server still answers images after the refusals.
  auto [status, reply] = vision_.chat({{"messages", one_image_messages(good)}, {"max_tokens", 2}});
  EXPECT_EQ(status, 200) << reply.dump();
}

TEST_F(VisionServerE2E, ImagesRefusedWhenVisionIsOffOrTheModelHasNoTower) {
  const std::string url = data_uri(image_bytes("grid224x168.png"), "image/png");
  auto [off_status, off] = vision_off_.chat({{"messages", one_image_messages(url)}, {"max_tokens", 2}});
  EXPECT_EQ(off_status, 400);
  EXPECT_NE(off["error"]["message"].get<std::string>().find("--vision"), std::string::npos) << off.dump();
  auto [text_status, text] = text_only_.chat({{"messages", one_image_messages(url)}, {"max_tokens", 2}});
  EXPECT_EQ(text_status, 400);
  EXPECT_NE(text["error"]["message"].get<std::string>().find("no vision tower"), std::string::npos) << text.dump();
  // Text still works on both.
  json hello = {{"messages", {{{"role", "user"}, {"content", "hello"}}}}, {"max_tokens", 2}};
  EXPECT_EQ(vision_off_.chat(hello).first, 200);
  EXPECT_EQ(text_only_.chat(hello).first, 200);
}

TEST_F(VisionServerE2E, PlaceholderTokensInUserTextAre400) {
  for (const char* text : {"<|image_pad|>", "see <|vision_start|><|image_pad|><|vision_end|>"}) {
    json body = {{"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", 2}};
    for (auto* s : {&vision_, &vision_off_}) {
      auto [status, reply] = s->chat(body);
      EXPECT_EQ(status, 400) << reply.dump();
      EXPECT_EQ(reply["error"]["param"], "messages[0].content");
    }
  }
  // Nor through text completions, as text or as the id.
  const int32_t pad = cases_["config_as_saved_by_transformers"]["image_token_id"];
  for (const json& prompt : {json("a <|image_pad|> b"), json::array({9707, pad})}) {
    auto [status, reply] = vision_.post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 2}});
    EXPECT_EQ(status, 400) << reply.dump();
    EXPECT_EQ(reply["error"]["param"], "prompt");
  }
  EXPECT_EQ(vision_.post("/v1/completions", {{"prompt", "a b"}, {"max_tokens", 2}}).first, 200);
}

TEST_F(VisionServerE2E, HttpImagesOnLoopbackNeedMediaAllowLocal) {
  Child http;
  int port = free_loopback_port();
  http.start({"timeout", "300", "python3", "-m", "http.server", std::to_string(port), "--bind", "127.0.0.1",
              "--directory", (shared_ / "images").string()},
             work_ / "http.log");
  httplib::Client probe("127.0.0.1", port);
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    if (auto r = probe.Get("/grid224x168.png"); r && r->status == 200) up = true;
    else std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(up) << http.log();
  const json& prompt = cases_["prompts"][0];
  json msgs = messages_with_urls(prompt, [&](const std::string& f) {
    return "http://127.0.0.1:" + std::to_string(port) + "/" + f;
  });
  auto [refused_status, refused] = vision_.chat(greedy_body(msgs, prompt["greedy"].size()));
  EXPECT_EQ(refused_status, 400) << refused.dump();
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("--media-allow-local"), std::string::npos)
      << refused.dump();
  auto [status, reply] = local_.chat(greedy_body(msgs, prompt["greedy"].size()));
  ASSERT_EQ(status, 200) << reply.dump();
  expect_reference_greedy(prompt, reply);
  auto [missing_status, missing] = local_.chat(
      {{"messages", one_image_messages("http://127.0.0.1:" + std::to_string(port) + "/absent.png")}, {"max_tokens", 2}});
  EXPECT_EQ(missing_status, 400) << missing.dump();
  http.stop();
}

TEST_F(VisionServerE2E, PromptCacheReusesAnImagePrefixOnlyForTheSameImage) {
  const json& prompt = cases_["prompts"][0];
  const int32_t pad = cases_["config_as_saved_by_transformers"]["image_token_id"];
  const int first_pad = first_image_pad(prompt, pad);
  ASSERT_GT(first_pad, 0);
  std::string png = image_bytes("grid224x168.png");
  // The same size (so the same grid and pad count) with other pixels.
  vision::RgbImage other = vision::decode_image(std::vector<uint8_t>(png.begin(), png.end()));
  for (int y = 0; y < other.height / 2; ++y)
    for (int x = 0; x < other.width; ++x)
      for (int c = 0; c < 3; ++c) {
        uint8_t& v = other.pixels[(size_t(y) * size_t(other.width) + size_t(x)) * 3 + size_t(c)];
        v = uint8_t(255 - v);
      }
  std::string other_png = encode_png(other);
  ASSERT_FALSE(other_png.empty());

  auto cached = [&](const std::string& bytes) {
    json body = greedy_body(one_image_messages(data_uri(bytes, "image/png")), 4);
    auto [status, reply] = local_.chat(body);
    EXPECT_EQ(status, 200) << reply.dump();
    EXPECT_EQ(reply["usage"]["prompt_tokens"], prompt["ids"].size());
    return reply["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  };
  cached(png);
  const int same = cached(png);
  EXPECT_GT(same, first_pad) << "the same image reuses its image prefix";
  const int different = cached(other_png);
  EXPECT_LE(different, first_pad) << "another image with the same grid must not reuse the first image's pads";
  EXPECT_GT(cached(other_png), first_pad);
}

}  // namespace
}  // namespace fs::test

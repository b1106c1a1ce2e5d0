// tiny-qwen3.5-vl served with --vision on the CPU over real HTTP: the reference image prompts (data: URIs) give the
// reference greedy ids, the tower runs once per image (/metrics), a repeated image resumes from the prompt cache's
// state snapshot with the fresh reply's bits while another image of the same grid does not, text-only replies equal
// those of a server without the image path, and video parts and images over the admitted size are 400s naming why.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "support/fixtures.h"
#include "support/media.h"
#include "support/server_process.h"
#include "vision/image.h"
#include "vision/vision_encoder.h"

namespace fs::test {
namespace {

using json = nlohmann::json;

// A flat grey RGB PNG of the given size, written by libpng.
std::string grey_png(int width, int height) {
  return encode_png_rgb(width, height, std::vector<uint8_t>(size_t(width) * size_t(height) * 3, 128));
}

std::pair<int, json> post_chat(const ServerProcess& server, const json& body) {
  return post_json(server.port(), "/v1/chat/completions", body);
}

// foldserve_images_encoded_total from /metrics, or -1.
double images_encoded(const ServerProcess& server) {
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return -1;
  const std::string name = "\nfoldserve_images_encoded_total ";
  const size_t at = r->body.find(name);
  return at == std::string::npos ? -1 : std::stod(r->body.substr(at + name.size()));
}

std::vector<int32_t> reply_ids(const json& reply) {
  std::vector<int32_t> ids;
  for (const auto& t : reply["choices"][0]["logprobs"]["content"]) {
    const std::string tok = t["token"];
    ids.push_back(tok.rfind("token_id:", 0) == 0 ? int32_t(std::stol(tok.substr(9))) : -1);
  }
  return ids;
}

class Qwen35VisionE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    FS_REQUIRE_SHARED(shared);
    shared_ = shared;
    model_ = (shared / "models" / "tiny-qwen3.5-vl").string();
    cases_ = read_json_file(shared / "reference" / "tiny-qwen3.5-vl" / "cases.json");
  }

  // The CPU server with images and `context` positions; the time bound per image is lifted, so the pixel limit it
  // sets from the tower's speed measured at start cannot refuse the reference images on a busy machine.
  std::vector<std::string> cpu_vision_flags(const std::string& context) const {
    return {model_, "--vision", "--device", "cpu", "--context", context,
            "--parallel", "2", "--max-image-seconds", "600"};
  }

  // A reference prompt's messages with each image part as an image_url part carrying a data: URI.
  json messages_of(const json& prompt) const {
    json msgs = prompt["messages"];
    for (auto& m : msgs) {
      if (!m["content"].is_array()) continue;
      for (auto& part : m["content"]) {
        if (part["type"] != "image") continue;
        const std::string file = part["image"];
        const std::string type = file.ends_with(".jpg") ? "image/jpeg" : "image/png";
        const std::string url = data_uri(read_file(shared_ / "images" / file), type);
        part = {{"type", "image_url"}, {"image_url", {{"url", url}}}};
      }
    }
    return msgs;
  }

  static json greedy_body(json messages, size_t max_tokens) {
    return {{"messages", std::move(messages)}, {"temperature", 0}, {"max_tokens", max_tokens},
            {"logprobs", true}, {"return_tokens_as_token_ids", true}};
  }

  std::filesystem::path shared_;
  std::string model_;
  json cases_;
};

TEST_F(Qwen35VisionE2E, ReferencePromptsGiveTheReferenceGreedyIdsAndTheTowerRunsOncePerImage) {
  ServerProcess server(cpu_vision_flags("1024"));
  ASSERT_TRUE(server.ready()) << server.stderr_text();
  ASSERT_FALSE(cases_["prompts"].empty());
  for (const auto& prompt : cases_["prompts"]) {
    SCOPED_TRACE(prompt["name"].get<std::string>());
    const double before = images_encoded(server);
    auto [status, reply] = post_chat(server, greedy_body(messages_of(prompt), prompt["greedy"].size()));
    ASSERT_EQ(status, 200) << reply.dump();
    EXPECT_EQ(images_encoded(server), before + 1);
    EXPECT_EQ(reply["usage"]["prompt_tokens"], prompt["ids"].size());
    const auto want = prompt["greedy"].get<std::vector<int32_t>>();
    const auto margins = prompt["greedy_margins"].get<std::vector<double>>();
    const auto got = reply_ids(reply);
    size_t n = 0;  // up to the first near-tie
    while (n < want.size() && margins[n] >= 1e-2) ++n;
    ASSERT_GE(got.size(), n);
    EXPECT_GE(n, 1u);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;
  }
  // One request with the same image twice encodes it twice: once per image part.
  json msgs = messages_of(cases_["prompts"][0]);
  msgs[0]["content"].push_back(msgs[0]["content"][0]);
  const double before = images_encoded(server);
  auto [status, reply] = post_chat(server, {{"messages", msgs}, {"max_tokens", 2}});
  ASSERT_EQ(status, 200) << reply.dump();
  EXPECT_EQ(images_encoded(server), before + 2);
}

TEST_F(Qwen35VisionE2E, ARepeatedImageResumesFromItsStateSnapshotAndAnotherImageOfTheSameGridDoesNot) {
  ServerProcess server(cpu_vision_flags("1024"));
  ASSERT_TRUE(server.ready()) << server.stderr_text();
  const json& prompt = cases_["prompts"][0];
  ASSERT_EQ(prompt["messages"][0]["content"][0]["type"], "image");
  const int32_t pad = read_json_file(std::filesystem::path(model_) / "config.json")["image_token_id"];
  const auto ids = prompt["ids"].get<std::vector<int32_t>>();
  const int first_pad = int(std::find(ids.begin(), ids.end(), pad) - ids.begin());
  ASSERT_LT(first_pad, int(ids.size()));
  // The prompt's image with its top half inverted: the same size, so the same grid and pad count, other pixels.
  const std::string png = read_file(shared_ / "images" / prompt["messages"][0]["content"][0]["image"].get<std::string>());
  vision::RgbImage other = vision::decode_image(std::span(reinterpret_cast<const uint8_t*>(png.data()), png.size()));
  for (size_t i = 0; i < other.pixels.size() / 2; ++i) other.pixels[i] = uint8_t(255 - other.pixels[i]);
  const std::string other_png = encode_png_rgb(other.width, other.height, other.pixels);
  ASSERT_FALSE(other_png.empty());

  auto ask = [&](const std::string& image) {
    json msgs = messages_of(prompt);
    msgs[0]["content"][0]["image_url"]["url"] = data_uri(image, "image/png");
    json body = greedy_body(msgs, 4);
    body["top_logprobs"] = 3;
    auto [status, reply] = post_chat(server, body);
    EXPECT_EQ(status, 200) << reply.dump();
    EXPECT_EQ(reply["usage"]["prompt_tokens"], ids.size());
    return reply;
  };
  auto cached = [](const json& reply) { return reply["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(); };
  auto logprobs = [](const json& reply) { return reply["choices"][0]["logprobs"].dump(); };
  const json first = ask(png);
  EXPECT_EQ(cached(first), 0);
  const json again = ask(png);
  EXPECT_GT(cached(again), first_pad) << "the same image resumes past the start of its pads";
  EXPECT_EQ(logprobs(again), logprobs(first)) << "resumed == fresh";
  const json other_first = ask(other_png);
  EXPECT_LE(cached(other_first), first_pad) << "another image must not reuse the first image's state";
  EXPECT_NE(logprobs(other_first), logprobs(first)) << "the image's pixels reach the reply";
  const json other_again = ask(other_png);
  EXPECT_GT(cached(other_again), first_pad);
  EXPECT_EQ(logprobs(other_again), logprobs(other_first));
}

TEST_F(Qwen35VisionE2E, TextOnlyRepliesEqualTheServerWithoutTheImagePath) {
  ServerProcess with_vision(cpu_vision_flags("512"));
  ServerProcess without({model_, "--device", "cpu", "--context", "512", "--parallel", "2"});
  ASSERT_TRUE(with_vision.ready()) << with_vision.stderr_text();
  ASSERT_TRUE(without.ready()) << without.stderr_text();
  json body = greedy_body({{{"role", "user"}, {"content", "Tell me something about computers."}}}, 12);
  body["top_logprobs"] = 3;
  auto [s1, a] = post_chat(with_vision, body);
  auto [s2, b] = post_chat(without, body);
  ASSERT_EQ(s1, 200) << a.dump();
  ASSERT_EQ(s2, 200) << b.dump();
  EXPECT_EQ(a["choices"][0]["logprobs"].dump(), b["choices"][0]["logprobs"].dump());
}

TEST_F(Qwen35VisionE2E, VideoPartsAndImagesOverTheAdmittedSizeAre400) {
  // The default time bound per image: a 4000×4000 image is past what it admits on any machine.
  ServerProcess server({model_, "--vision", "--device", "cpu", "--context", "1024", "--parallel", "2"});
  ASSERT_TRUE(server.ready()) << server.stderr_text();
  json video = {{"messages",
                 {{{"role", "user"},
                   {"content", {{{"type", "video_url"}, {"video_url", {{"url", "data:video/mp4;base64,AAAA"}}}},
                                {{"type", "text"}, {"text", "What happens?"}}}}}}},
                {"max_tokens", 2}};
  auto [vs, vr] = post_chat(server, video);
  EXPECT_EQ(vs, 400) << vr.dump();
  EXPECT_NE(vr["error"]["message"].get<std::string>().find("video"), std::string::npos) << vr.dump();
  EXPECT_EQ(vr["error"]["param"], "messages[0].content[0]") << vr.dump();

  const std::string big = grey_png(4000, 4000);
  ASSERT_FALSE(big.empty());
  json image = {{"messages",
                 {{{"role", "user"},
                   {"content", {{{"type", "image_url"}, {"image_url", {{"url", data_uri(big, "image/png")}}}},
                                {{"type", "text"}, {"text", "What is in it?"}}}}}}},
                {"max_tokens", 2}};
  const double before = images_encoded(server);
  auto [is, ir] = post_chat(server, image);
  EXPECT_EQ(is, 400) << ir.dump();
  EXPECT_NE(ir["error"]["message"].get<std::string>().find("this server admits"), std::string::npos) << ir.dump();
  EXPECT_EQ(images_encoded(server), before);
}

}  // namespace
}  // namespace fs::test

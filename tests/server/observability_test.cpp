// SSE framing, the Prometheus text, OpenAI response pieces, and whole lines in the request log under concurrency.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <cstring>

#include "core/error.h"

#include "server/metrics.h"
#include "server/openai_format.h"
#include "server/request_log.h"
#include "server/sse.h"

namespace fs::server {
namespace {

using json = nlohmann::json;

TEST(Sse, FramesOneLineEventsAndDone) {
  std::string e = sse_event({{"text", "a\nb"}});
  EXPECT_EQ(e, "data: {\"text\":\"a\\nb\"}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  EXPECT_EQ(sse_heartbeat().front(), ':');
  // Invalid UTF-8 from a model never throws.
  EXPECT_NO_THROW(sse_event({{"text", std::string("\xff\xfe")}}));
}

TEST(Metrics, RendersCountersHistogramsAndEngineGauges) {
  Metrics m;
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/completions", 400);
  m.add_tokens(10, 5, 2);
  m.observe_ttft(0.02);
  m.observe_ttft(3.0);
  m.observe_token_latency(0.004);
  std::string loading = m.render(nullptr);
  EXPECT_NE(loading.find("foldserve_model_loaded 0"), std::string::npos);
  EXPECT_EQ(loading.find("foldserve_kv_pages_used"), std::string::npos);

  EngineStats st;
  st.active_streams = 2;
  st.queued = 1;
  st.kv_pages_total = 100;
  st.kv_pages_used = 30;
  st.rounds = 4;
  st.rows = 10;
  std::string text = m.render(&st);
  auto has = [&](const std::string& line) { EXPECT_NE(text.find(line + "\n"), std::string::npos) << line; };
  has("foldserve_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 2");
  has("foldserve_requests_total{route=\"/v1/completions\",status=\"400\"} 1");
  has("foldserve_prompt_tokens_total 10");
  has("foldserve_completion_tokens_total 5");
  has("foldserve_time_to_first_token_seconds_bucket{le=\"0.025\"} 1");
  has("foldserve_time_to_first_token_seconds_bucket{le=\"5\"} 2");
  has("foldserve_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2");
  has("foldserve_time_to_first_token_seconds_count 2");
  has("foldserve_inter_token_latency_seconds_count 1");
  has("foldserve_active_streams 2");
  has("foldserve_queue_depth 1");
  has("foldserve_kv_pages_used 30");
  has("foldserve_kv_pages_free 70");
  has("foldserve_rounds_total 4");
  has("foldserve_rows_per_round 2.5");
  // Every sample line belongs to a declared metric.
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::string name = line.substr(0, line.find_first_of("{ "));
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      if (name.size() > strlen(suffix) && name.compare(name.size() - strlen(suffix), strlen(suffix), suffix) == 0 &&
          text.find("# TYPE " + name + " ") == std::string::npos)
        name.resize(name.size() - strlen(suffix));
    EXPECT_NE(text.find("# TYPE " + name + " "), std::string::npos) << line;
  }
}

TEST(OpenAiFormat, UsageAndLogprobShapes) {
  json u = usage_json(7, 3, 2);
  EXPECT_EQ(u["total_tokens"], 10);
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 2);
  std::vector<TokenLogprob> toks = {{"Hi", -0.5f, {{"Hi", -0.5f}, {"Yo", -1.5f}}}, {"!", -0.25f, {}}};
  json chat = chat_logprobs_json(toks);
  ASSERT_EQ(chat["content"].size(), 2u);
  EXPECT_EQ(chat["content"][0]["token"], "Hi");
  EXPECT_EQ(chat["content"][0]["bytes"], json({72, 105}));
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["token"], "Yo");
  json legacy = completion_logprobs_json(toks, 4);
  EXPECT_EQ(legacy["tokens"], json({"Hi", "!"}));
  EXPECT_EQ(legacy["text_offset"], json({4, 6}));
  EXPECT_EQ(legacy["top_logprobs"][0]["Yo"], -1.5f);
  json calls = tool_calls_json({{"f", "{\"a\":1}"}}, 0, true);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(calls[0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_NE(random_id("x-"), random_id("x-"));
}

TEST(RequestLog, LinesNeverInterleave) {
  auto path = std::filesystem::temp_directory_path() / ("foldserve_log_" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  {
    RequestLog log(path.string());
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&log, t] {
        for (int i = 0; i < 200; ++i) log.write({{"thread", t}, {"i", i}, {"pad", std::string(size_t(500 + i), 'x')}});
      });
    }
    for (auto& th : threads) th.join();
  }
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "line " << lines;
    ++lines;
  }
  EXPECT_EQ(lines, 8 * 200);
  std::filesystem::remove(path);
  EXPECT_THROW(RequestLog("/nonexistent-dir/x.log"), Error);
}

}  // namespace
}  // namespace fs::server

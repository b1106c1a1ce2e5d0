// Reliability figures of the real server under hostile and heavy load (docs/reliability.md): /health latency
// under a slowloris flood, resident memory after body bombs, a soak with random disconnects, a drain on SIGTERM
// with streams in flight, and streams admitted per GiB of KV pool at a long context.
// Usage: bench_reliability [--only slowloris,bombs,soak,drain,admission] [--soak-minutes M] [--soak-streams N]
#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "bench_main.h"
#include "cli/args.h"
#include "core/files.h"
#include "support/fixtures.h"
#include "support/server_process.h"

namespace fs {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using test::ServerProcess;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
double mib(size_t bytes) { return double(bytes) / double(1 << 20); }
double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}
const std::string kHealth = "GET /health HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n";

void slowloris() {
  ServerProcess server({"--prompt-cache-gib", "0"});
  if (!server.ready()) throw std::runtime_error("server did not start: " + server.stderr_text());
  std::vector<int> slow;
  for (int i = 0; i < 500; ++i)
    if (int fd = test::connect_loopback(server.port()); fd >= 0) {
      ::send(fd, "P", 1, MSG_NOSIGNAL);
      slow.push_back(fd);
    }
  std::vector<double> lat;
  int failed = 0;
  auto start = Clock::now(), last_trickle = start;
  while (ms_since(start) < 20000) {
    if (ms_since(last_trickle) > 2000) {
      for (int fd : slow) ::send(fd, "O", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      last_trickle = Clock::now();
    }
    auto t = Clock::now();
    if (test::first_status(test::raw_exchange(server.port(), kHealth)) == 200) lat.push_back(ms_since(t));
    else ++failed;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int fd : slow) ::close(fd);
  std::printf("slowloris: 500 connections sending a head byte every 2 s for 20 s; /health asked %zu times, %d "
              "failed; p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
              lat.size() + size_t(failed), failed, pct(lat, 0.5), pct(lat, 0.99), pct(lat, 1.0));
}

void bombs() {
  ServerProcess server({"--prompt-cache-gib", "0", "--max-body-bytes", "1048576"});
  if (!server.ready()) throw std::runtime_error("server did not start: " + server.stderr_text());
  const size_t before = server.rss_bytes();
  const size_t depth = 100000;
  std::string nested = "{\"x\":" + std::string(depth, '[') + std::string(depth, ']') +
                       ",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  auto post = [&](const std::string& head_extra, const std::string& body) {
    return test::first_status(test::raw_exchange(
        server.port(), "POST /v1/chat/completions HTTP/1.1\r\nHost: b\r\n" + head_extra + "\r\n" + body, 3000));
  };
  int s1 = post("Content-Length: " + std::to_string(nested.size()) + "\r\n", nested);
  std::string chunk = "100000\r\n" + std::string(1 << 20, 'a') + "\r\n", chunked;
  for (int i = 0; i < 256; ++i) chunked += chunk;
  int s2 = post("Transfer-Encoding: chunked\r\n", chunked);
  int s3 = post("Content-Length: 1073741824\r\n", std::string(1 << 20, 'a'));
  std::string many = "{\"prompt\":[";
  for (int i = 0; i < 400000; ++i) many += "1,";
  many += "1]}";
  int s4 = post("Content-Length: " + std::to_string(many.size()) + "\r\n", many);
  const size_t after = server.rss_bytes();
  bool up = test::first_status(test::raw_exchange(server.port(), kHealth)) == 200;
  std::printf("bombs: 100,000-deep JSON → %d, 256 MiB chunked body → %d, declared 1 GiB body → %d, 400,001-value "
              "array in 0.8 MB → %d; server %s; resident memory %.1f → %.1f MiB (%+.1f MiB)\n",
              s1, s2, s3, s4, up ? "up" : "DOWN", mib(before), mib(after), mib(after) - mib(before));
}

void soak(double minutes, int streams) {
  auto shared = test::shared_dir();
  json cases = read_json_file(shared / "reference" / "fortune-demo" / "cases.json")["cases"];
  ServerProcess server({"--parallel", std::to_string(streams), "--prompt-cache-gib", "0"});
  if (!server.ready()) throw std::runtime_error("server did not start: " + server.stderr_text());
  const size_t rss_start = server.rss_bytes();
  std::atomic<int> replies{0}, equal{0}, errors{0}, cut{0};
  auto until = Clock::now() + std::chrono::milliseconds(int64_t(minutes * 60000));
  std::vector<std::thread> clients;
  for (int i = 0; i < streams; ++i)
    clients.emplace_back([&, i] {
      std::mt19937 rng{uint32_t(i)};
      while (Clock::now() < until) {
        const json& c = cases[rng() % cases.size()];
        json body = {{"messages", {{{"role", "user"}, {"content", c["ask"]}}}},
                     {"temperature", 0},
                     {"max_tokens", c["greedy"].size()},
                     {"stream", true}};
        // One request in five also sends a client that leaves after its first bytes.
        bool leave = rng() % 5 == 0;
        std::string text, raw;
        httplib::Client cl("127.0.0.1", server.port());
        cl.set_read_timeout(120, 0);
        auto r = cl.Post("/v1/chat/completions", body.dump(), "application/json");
        if (!r || r->status != 200) {
          ++errors;
          continue;
        }
        raw = r->body;
        if (leave) {
          // A client that leaves mid-stream: open, read a little, close.
          int fd = test::connect_loopback(server.port());
          const std::string req = test::raw_post("/v1/chat/completions", body.dump());
          ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
          char buf[256];
          (void)!::recv(fd, buf, sizeof buf, 0);
          ::close(fd);
          ++cut;
        }
        for (size_t at = raw.find("data: {"); at != std::string::npos; at = raw.find("data: {", at + 1)) {
          json ev = json::parse(raw.substr(at + 6, raw.find("\n", at) - at - 6), nullptr, false);
          if (ev.is_object() && !ev["choices"].empty() && ev["choices"][0]["delta"].contains("content"))
            text += ev["choices"][0]["delta"]["content"].get<std::string>();
        }
        ++replies;
        if (text == c["reply"].get<std::string>()) ++equal;
      }
    });
  std::vector<size_t> rss;
  while (Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    rss.push_back(server.rss_bytes());
  }
  for (auto& t : clients) t.join();
  std::printf("soak: %d streams for %.1f min: %d replies, %d equal to the reference, %d errors, %d clients left "
              "mid-stream; resident memory %.1f MiB at start, %.1f after 10 s, %.1f at the end\n",
              streams, minutes, replies.load(), equal.load(), errors.load(), cut.load(), mib(rss_start),
              rss.empty() ? 0.0 : mib(rss.front()), rss.empty() ? 0.0 : mib(rss.back()));
}

void drain() {
  auto shared = test::shared_dir();
  ServerProcess server({(shared / "models" / "tiny-qwen3").string(), "--parallel", "16", "--prompt-cache-gib", "0",
                        "--drain-seconds", "2"});
  if (!server.ready()) throw std::runtime_error("server did not start: " + server.stderr_text());
  std::vector<std::string> out(16);
  std::vector<std::thread> clients;
  std::string body = R"({"prompt":"Once upon a time","max_tokens":3000,"stream":true})";
  for (int i = 0; i < 16; ++i)
    clients.emplace_back([&, i] {
      out[size_t(i)] = test::raw_exchange(server.port(), test::raw_post("/v1/completions", body), 10000);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto t = Clock::now();
  int status = server.stop(SIGTERM, 30);
  double exit_ms = ms_since(t);
  for (auto& c : clients) c.join();
  int clean = 0, aborted = 0;
  for (const auto& s : out) {
    clean += s.find("data: [DONE]") != std::string::npos && s.find("\r\n0\r\n\r\n") != std::string::npos;
    aborted += s.find("\"finish_reason\":\"abort\"") != std::string::npos;
  }
  std::printf("drain: SIGTERM with 16 streams in flight (--drain-seconds 2): exit status %d after %.0f ms; %d of 16 "
              "streams ended with [DONE] and a closed chunked body, %d of them with finish_reason abort\n",
              status, exit_ms, clean, aborted);
}

void admission() {
  const int context = 32768, pages_per_gib = int((1ull << 30) / (8192ull * 16));
  ServerProcess server({"--context", std::to_string(context), "--kv-pages", std::to_string(pages_per_gib),
                        "--parallel", "512", "--queue-limit", "512", "--prompt-cache-gib", "0"});
  if (!server.ready()) throw std::runtime_error("server did not start: " + server.stderr_text());
  std::string prompt;
  for (int i = 0; i < 500; ++i) prompt += "word ";
  std::atomic<bool> done{false};
  int peak = 0;
  std::thread watcher([&] {
    httplib::Client c("127.0.0.1", server.port());
    while (!done) {
      if (auto r = c.Get("/metrics")) {
        size_t at = r->body.find("\nfoldserve_active_streams ");
        if (at != std::string::npos) peak = std::max(peak, std::stoi(r->body.substr(at + 26)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::vector<std::thread> clients;
  json body = {{"prompt", prompt}, {"max_tokens", 128}, {"temperature", 0}};
  for (int i = 0; i < 300; ++i)
    clients.emplace_back([&] {
      httplib::Client c("127.0.0.1", server.port());
      c.set_read_timeout(600, 0);
      (void)c.Post("/v1/completions", body.dump(), "application/json");
    });
  for (auto& t : clients) t.join();
  done = true;
  watcher.join();
  std::printf("admission: fortune-demo (8 KiB of KV per position), context %d, a 1 GiB pool (%d pages): before, "
              "each stream reserved its whole context up front, so 1 GiB held %d streams; now 300 requests of ~500 "
              "prompt + 128 reply tokens ran with up to %d streams at once\n",
              context, pages_per_gib, int((1ull << 30) / (8192ull * context)), peak);
}

int bench(int argc, char** argv) {
  std::vector<std::string> argv_s(argv + 1, argv + argc);
  cli::Args args(argv_s, {"only", "soak-minutes", "soak-streams"}, {});
  std::string only = args.get_or("only", "slowloris,bombs,soak,drain,admission");
  auto wanted = [&](const char* name) { return only.find(name) != std::string::npos; };
  if (test::shared_dir().empty()) throw std::runtime_error("the shared fixtures are missing (FOLDSERVE_SHARED)");
  if (wanted("slowloris")) slowloris();
  if (wanted("bombs")) bombs();
  if (wanted("soak")) soak(args.get_double("soak-minutes", 10.0), int(args.get_int("soak-streams", 32)));
  if (wanted("drain")) drain();
  if (wanted("admission")) admission();
  return 0;
}

}  // namespace
}  // namespace fs

int main(int argc, char** argv) { return fs::run_bench("bench_reliability", fs::bench, argc, argv); }

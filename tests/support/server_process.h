#pragma once
// A real `foldserve serve` started by a test on a free loopback port, waited for until /health says ok, and
// stopped with a signal; its stdout and stderr go to files.
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace fs::test {

class ServerProcess {
 public:
  // Starts `foldserve serve ARGS --port P`; ready() tells whether /health said ok within `wait_seconds`.
  explicit ServerProcess(const std::vector<std::string>& args, int wait_seconds = 60);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool ready() const { return ready_; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url(const std::string& path = "") const;
  std::string stdout_text() const;
  std::string stderr_text() const;
  // Sends `signal` and waits up to `wait_seconds` for the exit; the exit status, or -1 if it had to be killed.
  int stop(int signal, int wait_seconds = 30);
  // Resident memory of the server in bytes (from /proc).
  size_t rss_bytes() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool ready_ = false;
  std::filesystem::path dir_;
};

// POSTs `body` as JSON to 127.0.0.1:port; the status (0 when no answer came) and the parsed answer (discarded
// when it is not JSON).
std::pair<int, nlohmann::json> post_json(int port, const std::string& path, const nlohmann::json& body,
                                         int timeout_seconds = 300);
// The value of the Prometheus line `name value` in the server's /metrics text ("" when the name is not there).
std::string metric_value(const std::string& metrics_text, const std::string& name);
// /metrics of the server at 127.0.0.1:port ("" when it did not answer).
std::string metrics_text(int port);
// answer(i) for every i below n, all at once (one thread each); the answers in order of i.
std::vector<std::string> all_at_once(size_t n, const std::function<std::string(size_t)>& answer);
// A connected TCP socket to 127.0.0.1:port, or -1.
int connect_loopback(int port);
// The bytes of a JSON POST to `path`, with `extra_headers` (each ending in CR LF) before its Content-Length.
std::string raw_post(const std::string& path, const std::string& body, const std::string& extra_headers = "");
// One HTTP exchange over a raw socket: sends `bytes`, then reads until the peer closes or `wait_ms` passes quietly.
std::string raw_exchange(int port, const std::string& bytes, int wait_ms = 2000);
// The status code of the first response in `raw`, or 0.
int first_status(const std::string& raw);

}  // namespace fs::test

#include "support/server_process.h"

#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/fixtures.h"
#include "support/process.h"

namespace fs::test {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::pair<int, nlohmann::json> post_json(int port, const std::string& path, const nlohmann::json& body,
                                         int timeout_seconds) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(timeout_seconds, 0);
  auto r = c.Post(path, body.dump(), "application/json");
  if (!r) return {0, nullptr};
  return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
}

std::string metric_value(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return "";
  const size_t from = at + name.size() + 2;
  return text.substr(from, text.find('\n', from) - from);
}

std::string metrics_text(int port) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/metrics");
  return r ? r->body : "";
}

std::vector<std::string> all_at_once(size_t n, const std::function<std::string(size_t)>& answer) {
  std::vector<std::string> out(n);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) threads.emplace_back([&, i] { out[i] = answer(i); });
  for (auto& t : threads) t.join();
  return out;
}

int connect_loopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

ServerProcess::ServerProcess(const std::vector<std::string>& args, int wait_seconds) {
  static int serial = 0;
  dir_ = std::filesystem::temp_directory_path() /
         ("foldserve_server_" + std::to_string(::getpid()) + "_" + std::to_string(serial++));
  std::filesystem::create_directories(dir_);
  port_ = free_loopback_port();
  std::vector<std::string> argv = {foldserve_binary(), "serve"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--port", std::to_string(port_)});
  std::fflush(nullptr);  // so the child does not write our buffered output again
  pid_ = ::fork();
  if (pid_ == 0) {
    (void)!std::freopen((dir_ / "out").c_str(), "w", stdout);
    (void)!std::freopen((dir_ / "err").c_str(), "w", stderr);
    std::vector<char*> cargs;
    for (auto& a : argv) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    ::execv(cargs[0], cargs.data());
    std::_Exit(127);
  }
  for (int i = 0; i < wait_seconds * 10; ++i) {
    if (first_status(raw_exchange(port_, "GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 1000)) ==
        200) {
      ready_ = true;
      return;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

ServerProcess::~ServerProcess() {
  // A drain lets the request log take its last lines before the process ends (killed if it takes too long).
  if (pid_ > 0) stop(SIGTERM, 20);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string ServerProcess::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::string ServerProcess::stdout_text() const { return read_file(dir_ / "out"); }
std::string ServerProcess::stderr_text() const { return read_file(dir_ / "err"); }

int ServerProcess::stop(int signal, int wait_seconds) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, signal);
  int status = 0;
  for (int i = 0; i < wait_seconds * 100; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return -1;
}

size_t ServerProcess::rss_bytes() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/statm");
  size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * size_t(::sysconf(_SC_PAGESIZE));
}

std::string raw_post(const std::string& path, const std::string& body, const std::string& extra_headers) {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string raw_exchange(int port, const std::string& bytes, int wait_ms) {
  int fd = connect_loopback(port);
  if (fd < 0) return "";
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += size_t(n);
  }
  std::string out;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, wait_ms) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  ::close(fd);
  return out;
}

int first_status(const std::string& raw) {
  if (raw.rfind("HTTP/1.", 0) != 0 || raw.size() < 12) return 0;
  return std::atoi(raw.c_str() + 9);
}

}  // namespace fs::test

#pragma once
// An event-driven HTTP/1.1 server. One thread waits on every connection (epoll) and parses requests as bytes
// arrive, under deadlines for the head and the body and caps on connections (in all and per client address);
// whole requests go to a pool of worker threads, so slow or idle clients hold no thread. Keep-alive and
// pipelining: a connection's next request is parsed from the bytes left after the previous one.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/http/request_parser.h"
#include "server/http/router.h"

namespace fs::http {

struct ServerLimits {
  ParserLimits parser;
  std::chrono::milliseconds head_timeout{10000};   // from a request's first byte to its blank line
  std::chrono::milliseconds body_timeout{60000};   // from the head to the body's last byte
  std::chrono::milliseconds idle_timeout{60000};   // a kept-alive connection waiting for its next request
  std::chrono::milliseconds write_timeout{30000};  // each write of a response
  int max_connections = 1024;
  int max_connections_per_client = 256;
  int backlog = 1024;
  int workers = 16;
};

class HttpServer {
 public:
  explicit HttpServer(ServerLimits limits);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void route(std::string method, std::string pattern, Handler handler);
  // Answered on the event loop, never queued behind busy workers: for handlers that never block and answer a
  // few hundred bytes (/health); a reply the socket cannot take at once closes the connection.
  void route_quick(std::string method, std::string pattern, Handler handler);
  // Runs once a routed request's head is whole, before its body is read; false answers with `res` at once.
  void set_head_check(std::function<bool(const Request&, Response&)> check);
  // The JSON body of the errors the server answers itself (malformed requests, 404, 405, 408, 413, ...).
  void set_error_body(std::function<std::string(int status, const std::string& message)> body);
  // Runs before each handler and after each response, on the thread that ran the handler.
  void set_hooks(std::function<void(const Request&)> before,
                 std::function<void(const Request&, const Response&)> after);

  // Listens on host:port; returns the port. Throws fs::Error naming the address when it cannot.
  int bind(const std::string& host, int port);
  // Serves until stop(); then waits for the handlers running.
  void run();
  // Ends run() from any thread; streams being written see their writes fail.
  void stop();
  bool running() const { return running_.load(); }
  // Requests handed to workers and not yet answered (streams included).
  int requests_in_flight() const { return in_flight_.load(); }

 private:
  struct Connection;
  using Clock = std::chrono::steady_clock;

  void accept_all();
  bool make_room(const std::string& client);
  void read_from(Connection& c);
  void advance(Connection& c);
  bool check_head(Connection& c);
  void dispatch(Connection& c);
  void answer_here(Connection& c, Response& res, bool keep_alive);
  void answer_error(Connection& c, int status, const std::string& message, bool keep_alive);
  void serve_on_worker(Connection* c);
  void take_back_returned();
  void expire(Clock::time_point now);
  void close_connection(int fd);
  void watch(Connection& c);
  void worker_loop();
  Response error_response(int status, const std::string& message) const;

  ServerLimits limits_;
  Router router_;
  std::function<bool(const Request&, Response&)> head_check_;
  std::function<std::string(int, const std::string&)> error_body_;
  std::function<void(const Request&)> before_;
  std::function<void(const Request&, const Response&)> after_;

  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
  std::atomic<bool> running_{false}, stopping_{false};
  std::atomic<int> in_flight_{0};
  std::unordered_map<int, std::unique_ptr<Connection>> connections_;
  std::unordered_map<std::string, int> per_client_;
  uint64_t next_serial_ = 0;

  std::mutex mu_;
  std::condition_variable work_ready_;
  std::deque<Connection*> work_;
  std::vector<std::pair<int, bool>> returned_;  // (fd, keep open) handed back by workers
  std::vector<std::thread> workers_;
};

}  // namespace fs::http

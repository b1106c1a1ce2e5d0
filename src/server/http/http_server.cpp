#include "server/http/http_server.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/error.h"
#include "server/http/response_writer.h"
#include "server/http/socket_io.h"

namespace fs::http {

struct HttpServer::Connection {
  Connection(int fd, std::string client, ParserLimits limits, uint64_t serial)
      : fd(fd), client(std::move(client)), parser(limits), serial(serial) {}
  int fd;
  std::string client;
  RequestParser parser;
  uint64_t serial;  // accept order
  Clock::time_point deadline;
  bool busy = false;       // a worker owns it
  bool head_seen = false;  // the current request's head was routed and checked
  Router::Match match;
};

HttpServer::HttpServer(ServerLimits limits) : limits_(limits) {
  const long files = raise_file_limit();
  limits_.max_connections = int(std::clamp<long>(std::min<long>(limits_.max_connections, files - 64), 16, 1 << 20));
  limits_.workers = std::max(1, limits_.workers);
}

HttpServer::~HttpServer() {
  stop();
  for (auto& [fd, c] : connections_) ::close(fd);
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_})
    if (fd >= 0) ::close(fd);
}

void HttpServer::route(std::string method, std::string pattern, Handler handler) {
  router_.add(std::move(method), std::move(pattern), std::move(handler), false);
}

void HttpServer::route_quick(std::string method, std::string pattern, Handler handler) {
  router_.add(std::move(method), std::move(pattern), std::move(handler), true);
}

void HttpServer::set_head_check(std::function<bool(const Request&, Response&)> check) {
  head_check_ = std::move(check);
}

void HttpServer::set_error_body(std::function<std::string(int, const std::string&)> body) {
  error_body_ = std::move(body);
}

void HttpServer::set_hooks(std::function<void(const Request&)> before,
                           std::function<void(const Request&, const Response&)> after) {
  before_ = std::move(before);
  after_ = std::move(after);
}

int HttpServer::bind(const std::string& host, int port) {
  listen_fd_ = listen_on(host, port, limits_.backlog);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) throw Error("cannot set up the HTTP event loop");
  for (int fd : {listen_fd_, wake_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  return port;
}

void HttpServer::run() {
  if (listen_fd_ < 0) throw Error("HttpServer::run before bind");
  running_ = true;
  for (int i = 0; i < limits_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
  std::vector<epoll_event> events(256);
  while (!stopping_.load()) {
    int n = ::epoll_wait(epoll_fd_, events.data(), int(events.size()), 100);
    for (int i = 0; i < n; ++i) {
      const int fd = events[size_t(i)].data.fd;
      if (fd == listen_fd_) {
        accept_all();
      } else if (fd == wake_fd_) {
        uint64_t count;
        while (::read(wake_fd_, &count, sizeof count) > 0) {
        }
      } else if (auto it = connections_.find(fd); it != connections_.end() && !it->second->busy) {
        read_from(*it->second);
      }
    }
    take_back_returned();
    expire(Clock::now());
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  for (auto& [fd, c] : connections_) ::close(fd);
  connections_.clear();
  per_client_.clear();
  running_ = false;
}

void HttpServer::stop() {
  {
    // Under the lock, so a worker between its check and its wait cannot miss the wake-up.
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }
  work_ready_.notify_all();
}

void HttpServer::accept_all() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors: free the oldest idle connection so the backlog keeps moving.
      if ((errno == EMFILE || errno == ENFILE) && make_room("")) continue;
      return;
    }
    std::string client = peer_address(fd);
    if (!make_room(client)) {
      ::close(fd);
      continue;
    }
    set_nonblocking(fd);
    auto c = std::make_unique<Connection>(fd, client, limits_.parser, next_serial_++);
    c->deadline = Clock::now() + limits_.head_timeout;
    watch(*c);
    ++per_client_[client];
    connections_[fd] = std::move(c);
  }
}

// Under a cap, the oldest connection no worker holds (still in its head first) gives way to the new one.
bool HttpServer::make_room(const std::string& client) {
  for (int tries = 0; tries < 2; ++tries) {
    const bool client_full = !client.empty() && per_client_[client] >= limits_.max_connections_per_client;
    const bool all_full = int(connections_.size()) >= limits_.max_connections || client.empty();
    if (!client_full && !all_full) return true;
    Connection* victim = nullptr;
    for (auto& [fd, c] : connections_) {
      if (c->busy || (client_full && c->client != client)) continue;
      if (!victim || std::pair(c->head_seen, c->serial) < std::pair(victim->head_seen, victim->serial))
        victim = c.get();
    }
    if (!victim) return false;
    close_connection(victim->fd);
    if (client.empty()) return true;
  }
  return per_client_[client] < limits_.max_connections_per_client &&
         int(connections_.size()) < limits_.max_connections;
}

void HttpServer::watch(Connection& c) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c.fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev);
}

void HttpServer::read_from(Connection& conn) {
  const int fd = conn.fd;
  char buf[16384];
  for (;;) {
    auto it = connections_.find(fd);
    if (it == connections_.end() || it->second->busy) return;
    Connection& c = *it->second;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) return close_connection(fd);
    const bool was_started = c.parser.started();
    c.parser.feed(std::string_view(buf, size_t(n)));
    if (!was_started) c.deadline = Clock::now() + limits_.head_timeout;
    advance(c);
  }
}

void HttpServer::advance(Connection& c) {
  const int fd = c.fd;
  auto alive = [&] { return connections_.count(fd) > 0; };
  for (;;) {
    switch (c.parser.state()) {
      case RequestParser::State::NeedMore:
        return;
      case RequestParser::State::Failed:
        return answer_error(c, c.parser.error_status(), c.parser.error_message(), false);
      case RequestParser::State::HeadReady:
        if (c.head_seen) return;
        c.head_seen = true;
        if (!check_head(c)) return;
        c.deadline = Clock::now() + limits_.body_timeout;
        if (to_lower(c.parser.request().header("expect")) == "100-continue" && c.parser.request().minor_version >= 1)
          send_now(fd, "HTTP/1.1 100 Continue\r\n\r\n");
        c.parser.parse();
        continue;
      case RequestParser::State::Complete:
        if (!c.head_seen) {
          c.head_seen = true;
          if (!check_head(c)) {
            if (!alive()) return;
            continue;
          }
        }
        if (!c.match.quick) return dispatch(c);
        {
          Request& req = c.parser.request();
          req.remote_addr = c.client;
          req.params = c.match.params;
          if (before_) before_(req);
          Response res;
          try {
            (*c.match.handler)(req, res);
          } catch (const std::exception& e) {
            res = error_response(500, e.what());
          }
          answer_here(c, res, req.wants_keep_alive());
        }
        if (!alive()) return;
        continue;
    }
  }
}

// Routes the head and runs the head check; answers and returns false when the request goes no further.
bool HttpServer::check_head(Connection& c) {
  Request& req = c.parser.request();
  req.remote_addr = c.client;
  const bool whole = c.parser.state() == RequestParser::State::Complete;
  c.match = router_.find(req.method, req.path);
  if (!c.match.handler) {
    if (c.match.allow.empty()) {
      answer_error(c, 404, "no route " + req.method + " " + req.path, whole && req.wants_keep_alive());
    } else {
      Response res = error_response(405, "the method " + req.method + " is not allowed on " + req.path);
      res.set_header("allow", c.match.allow);
      answer_here(c, res, whole && req.wants_keep_alive());
    }
    return false;
  }
  req.params = c.match.params;
  Response res;
  if (head_check_ && !head_check_(req, res)) {
    answer_here(c, res, whole && req.wants_keep_alive());
    return false;
  }
  return true;
}

void HttpServer::answer_here(Connection& c, Response& res, bool keep_alive) {
  keep_alive = keep_alive && !stopping_.load();
  const bool sent = send_now(c.fd, serialize_whole(res, c.parser.request(), keep_alive));
  if (after_) after_(c.parser.request(), res);
  if (!sent || !keep_alive) return close_connection(c.fd);
  c.parser.next();
  c.head_seen = false;
  c.deadline = Clock::now() + (c.parser.started() ? limits_.head_timeout : limits_.idle_timeout);
  c.parser.parse();
}

void HttpServer::answer_error(Connection& c, int status, const std::string& message, bool keep_alive) {
  Response res = error_response(status, message);
  answer_here(c, res, keep_alive);
}

Response HttpServer::error_response(int status, const std::string& message) const {
  Response res;
  res.status = status;
  res.set_content(error_body_ ? error_body_(status, message) : message, "application/json");
  return res;
}

void HttpServer::dispatch(Connection& c) {
  c.busy = true;
  ++in_flight_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  {
    std::lock_guard lock(mu_);
    work_.push_back(&c);
  }
  work_ready_.notify_one();
}

void HttpServer::worker_loop() {
  for (;;) {
    Connection* c = nullptr;
    {
      std::unique_lock lock(mu_);
      work_ready_.wait(lock, [&] { return stopping_.load() || !work_.empty(); });
      if (stopping_.load()) return;
      c = work_.front();
      work_.pop_front();
    }
    serve_on_worker(c);
  }
}

// Whether the peer has closed the connection: a non-blocking peek that reads end of stream or an error.
static bool peer_closed(int fd) {
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void HttpServer::serve_on_worker(Connection* c) {
  Request& req = c->parser.request();
  req.client_gone = [fd = c->fd] { return peer_closed(fd); };
  Response res;
  if (before_) before_(req);
  try {
    (*c->match.handler)(req, res);
  } catch (const std::exception& e) {
    res = error_response(500, e.what());
  } catch (...) {
    res = error_response(500, "unexpected error");
  }
  const bool keep = req.wants_keep_alive() && !stopping_.load();
  const bool open = write_response(c->fd, req, res, keep, limits_.write_timeout, stopping_);
  if (after_) after_(req, res);
  --in_flight_;
  {
    std::lock_guard lock(mu_);
    returned_.emplace_back(c->fd, open);
  }
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void HttpServer::take_back_returned() {
  std::vector<std::pair<int, bool>> back;
  {
    std::lock_guard lock(mu_);
    back.swap(returned_);
  }
  for (auto [fd, open] : back) {
    auto it = connections_.find(fd);
    if (it == connections_.end()) continue;
    Connection& c = *it->second;
    c.busy = false;
    if (!open) {
      close_connection(fd);
      continue;
    }
    c.parser.next();
    c.head_seen = false;
    c.deadline = Clock::now() + (c.parser.started() ? limits_.head_timeout : limits_.idle_timeout);
    watch(c);
    c.parser.parse();
    advance(c);
  }
}

// Connections past their deadline: a request half sent gets 408, an idle one is closed.
void HttpServer::expire(Clock::time_point now) {
  std::vector<int> late;
  for (auto& [fd, c] : connections_)
    if (!c->busy && now > c->deadline) late.push_back(fd);
  for (int fd : late) {
    Connection& c = *connections_.at(fd);
    if (c.parser.started()) answer_error(c, 408, "the request did not arrive in time", false);
    else close_connection(fd);
  }
}

void HttpServer::close_connection(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  auto client = per_client_.find(it->second->client);
  if (client != per_client_.end() && --client->second <= 0) per_client_.erase(client);
  connections_.erase(it);
}

}  // namespace fs::http

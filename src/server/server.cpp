#include "server/server.h"

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "server/chat_page.h"
#include "server/image_input.h"
#include "server/openai_format.h"
#include "server/request_trace.h"
#include "server/server_state.h"

namespace fs::server {

using json = nlohmann::json;

RequestTrace& current_trace() {
  thread_local RequestTrace trace;
  return trace;
}

void begin_trace() {
  RequestTrace& t = current_trace();
  t = RequestTrace{};
  t.start = std::chrono::steady_clock::now();
  t.start_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  t.id = random_id("req-");
}

namespace {

std::string route_label(const http::Request& req) {
  static const char* known[] = {"/", "/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"};
  for (const char* k : known)
    if (req.path == k) return k;
  if (req.path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

http::ServerLimits http_limits(const ServerOptions& o) {
  http::ServerLimits l;
  l.parser.max_body_bytes = o.max_body_bytes;
  l.head_timeout = o.header_timeout;
  l.body_timeout = o.body_timeout;
  l.max_connections = o.max_connections;
  l.max_connections_per_client = o.max_connections_per_client;
  // Streams hold a worker each: room for every admitted and queued stream, plus some for short requests.
  l.workers = std::clamp(o.engine.parallel + o.engine.queue_limit + 8, 8, 1024);
  return l;
}

// The error a route's own failures and the HTTP layer's refusals share.
ApiError http_error(int status, const std::string& message, size_t max_body) {
  switch (status) {
    case 404: return not_found(message);
    case 413: return too_large(max_body);
    case 408: return ApiError{408, message, "invalid_request_error", "", "request_timeout"};
    case 500: return server_error(message);
    default: return ApiError{status, message, "invalid_request_error", "", ""};
  }
}

}  // namespace

Server::State::State(ServerOptions o) : options(std::move(o)), keys(options.api_keys), http(http_limits(options)) {
  if (!options.request_log.empty()) log = std::make_unique<RequestLog>(options.request_log);
}

bool Server::State::admit(const http::Request& req, http::Response& res) {
  if (req.path == "/health" || req.path == "/") return true;
  if (!keys.allows(std::string(req.header("authorization")), std::string(req.header("x-api-key")))) {
    answer_error(res, unauthorized());
    return false;
  }
  if (req.path == "/metrics") return true;
  if (draining.load()) {
    answer_error(res, ApiError{503, "the server is shutting down", "server_error", "", "draining"});
    return false;
  }
  if (!ready.load()) {
    answer_error(res, loading());
    return false;
  }
  return true;
}

void Server::State::answer_error(http::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.body(), "application/json");
  if (e.status == 429 || e.status == 503) res.set_header("retry-after", "1");
  current_trace().details["error"] = e.message;
}

void Server::State::answer_json(http::Response& res, const json& body) {
  res.status = 200;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

Server::Server(ServerOptions options) : state_(std::make_unique<State>(std::move(options))) {
  State& s = *state_;
  auto& http = s.http;

  http.set_head_check([&s](const http::Request& req, http::Response& res) { return s.admit(req, res); });
  http.set_error_body([&s](int status, const std::string& message) {
    current_trace().details["error"] = message;
    return http_error(status, message, s.options.max_body_bytes).body();
  });
  // Counts and logs every request once its response (a whole stream included) has been written.
  http.set_hooks([](const http::Request&) { begin_trace(); },
                 [&s](const http::Request& req, const http::Response& res) {
                   RequestTrace& t = current_trace();
                   if (t.id.empty()) begin_trace();
                   std::string route = t.route.empty() ? route_label(req) : t.route;
                   s.metrics.count_request(route, res.status);
                   if (s.log) {
                     json line = {{"id", t.id},
                                  {"received_unix_ms", t.start_unix_ms},
                                  {"duration_ms", std::chrono::duration<double, std::milli>(
                                                      std::chrono::steady_clock::now() - t.start)
                                                      .count()},
                                  {"method", req.method},
                                  {"path", req.path},
                                  {"status", res.status},
                                  {"remote", req.remote_addr}};
                     for (auto& [k, v] : t.details.items()) line[k] = v;
                     s.log->write(line);
                   }
                   t = RequestTrace{};
                 });

  // Answered on the event loop, so it stays quick whatever the workers are doing.
  http.route_quick("GET", "/health", [&s](const http::Request&, http::Response& res) {
    if (s.draining.load()) {
      res.status = 503;
      res.set_content(R"({"status":"draining","reason":"the server is shutting down"})", "application/json");
    } else if (!s.ready.load()) {
      res.status = 503;
      res.set_content(R"({"status":"loading","reason":"the model is loading"})", "application/json");
    } else {
      res.set_content(R"({"status":"ok"})", "application/json");
    }
  });
  // The browser chat page; open without a key (the page asks for one when the API answers 401).
  http.route("GET", "/", [](const http::Request&, http::Response& res) {
    res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
  });

  auto model_json = [&s] {
    return json{{"id", s.served_name},
                {"object", "model"},
                {"created", unix_seconds()},
                {"owned_by", "foldserve"},
                {"max_model_len", s.options.engine.context},
                {"vision", s.model->vision_encoder != nullptr}};
  };
  http.route("GET", "/v1/models", [&s, model_json](const http::Request&, http::Response& res) {
    s.answer_json(res, {{"object", "list"}, {"data", json::array({model_json()})}});
  });
  http.route("GET", "/v1/models/*", [&s, model_json](const http::Request& req, http::Response& res) {
    if (req.params[0] != s.served_name)
      return s.answer_error(res, not_found("the model '" + req.params[0] + "' does not exist", "model_not_found"));
    s.answer_json(res, model_json());
  });
  http.route("GET", "/metrics", [&s](const http::Request&, http::Response& res) {
    EngineStats stats;
    vision::VisionEncoderStats tower;
    const bool have = s.ready.load(), images = have && s.model->vision_encoder;
    if (have) stats = s.engine->stats();
    if (images) tower = s.model->vision_encoder->stats();
    res.set_content(s.metrics.render(have ? &stats : nullptr, images ? &tower : nullptr), "text/plain; version=0.0.4");
  });
  add_completion_routes(s);
}

Server::~Server() {
  stop();
  // The engine refers to the model's weights: end it first.
  state_->engine.reset();
  state_->model.reset();
}

int Server::bind() {
  State& s = *state_;
  s.options.port = s.http.bind(s.options.host, s.options.port);
  return s.options.port;
}

void Server::serve(Loader loader, std::function<void(const std::string&)> on_ready) {
  State& s = *state_;
  std::thread load([&s, loader = std::move(loader), on_ready = std::move(on_ready)] {
    try {
      auto model = loader();
      if (s.options.vision.enabled) attach_vision(*model, s.options.vision);
      std::string name = s.options.served_model_name.empty() ? model->name : s.options.served_model_name;
      if (s.options.prepare_engine) s.options.prepare_engine(*model, s.options.engine);
      auto engine = std::make_unique<Engine>(*model->model, s.options.engine);
      {
        std::lock_guard<std::mutex> lock(s.load_mu);
        s.served_name = name;
        s.model = std::move(model);
        s.engine = std::move(engine);
      }
      s.ready.store(true);
      if (on_ready) on_ready("http://" + s.options.host + ":" + std::to_string(s.options.port));
    } catch (const std::exception& e) {
      {
        std::lock_guard<std::mutex> lock(s.load_mu);
        s.load_error = e.what();
      }
      s.http.stop();
    }
  });
  s.http.run();
  load.join();
  std::lock_guard<std::mutex> lock(s.load_mu);
  if (!s.load_error.empty()) throw Error(s.load_error);
}

void Server::stop() { state_->http.stop(); }

void Server::drain() {
  State& s = *state_;
  s.draining = true;
  using namespace std::chrono;
  auto wait_idle = [&s](steady_clock::time_point until) {
    while (s.http.requests_in_flight() > 0 && steady_clock::now() < until)
      std::this_thread::sleep_for(milliseconds(20));
    return s.http.requests_in_flight() == 0;
  };
  if (!wait_idle(steady_clock::now() + seconds(std::max(0, s.options.drain_seconds)))) {
    s.abort_streams = true;
    wait_idle(steady_clock::now() + seconds(5));
  }
  s.http.stop();
}

bool Server::ready() const { return state_->ready.load(); }

std::string Server::served_model() const {
  std::lock_guard<std::mutex> lock(state_->load_mu);
  return state_->served_name;
}

}  // namespace fs::server

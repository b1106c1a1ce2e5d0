#include "server/server.h"

#include <algorithm>
#include <thread>

#include "core/error.h"
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

std::string route_label(const httplib::Request& req) {
  static const char* known[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"};
  for (const char* k : known)
    if (req.path == k) return k;
  if (req.path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

}  // namespace

Server::State::State(ServerOptions o) : options(std::move(o)), keys(options.api_keys) {
  if (!options.request_log.empty()) log = std::make_unique<RequestLog>(options.request_log);
}

bool Server::State::admit(const httplib::Request& req, httplib::Response& res) {
  if (!keys.allows(req.get_header_value("Authorization"), req.get_header_value("x-api-key"))) {
    answer_error(res, unauthorized());
    return false;
  }
  if (!ready.load()) {
    answer_error(res, loading());
    return false;
  }
  return true;
}

void Server::State::answer_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.body(), "application/json");
  current_trace().details["error"] = e.message;
}

void Server::State::answer_json(httplib::Response& res, const json& body) {
  res.status = 200;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

Server::Server(ServerOptions options) : state_(std::make_unique<State>(std::move(options))) {
  State& s = *state_;
  auto& http = s.http;
  size_t threads = size_t(std::clamp(s.options.engine.parallel + s.options.engine.queue_limit + 8, 8, 512));
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(s.options.max_body_bytes);
  http.set_keep_alive_max_count(1000);
  http.set_read_timeout(30, 0);
  http.set_write_timeout(30, 0);

  http.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    begin_trace();
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Bodies for errors httplib answers itself (unknown route, body too large, malformed request).
  http.set_error_handler(httplib::Server::HandlerWithResponse([&s](const httplib::Request& req,
                                                                   httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e = res.status == 404   ? not_found("no route " + req.method + " " + req.path)
                 : res.status == 413 ? too_large(s.options.max_body_bytes)
                 : res.status == 405 ? ApiError{405, "method not allowed", "invalid_request_error", "", ""}
                                     : ApiError{res.status, "malformed HTTP request", "invalid_request_error", "", ""};
    res.set_content(e.body(), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([&s](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unexpected error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    s.answer_error(res, server_error(what));
  });
  // Counts and logs every request once its response (a whole stream included) has been written.
  http.set_logger([&s](const httplib::Request& req, const httplib::Response& res) {
    RequestTrace& t = current_trace();
    if (t.id.empty()) begin_trace();
    std::string route = t.route.empty() ? route_label(req) : t.route;
    s.metrics.count_request(route, res.status);
    if (s.log) {
      json line = {{"id", t.id},
                   {"received_unix_ms", t.start_unix_ms},
                   {"duration_ms", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t.start)
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

  http.Get("/health", [&s](const httplib::Request&, httplib::Response& res) {
    if (!s.ready.load()) {
      res.status = 503;
      res.set_content(R"({"status":"loading"})", "application/json");
    } else {
      res.set_content(R"({"status":"ok"})", "application/json");
    }
  });

  // Everything but /health checks the key first, then that the model serves.
  auto guarded = [&s](std::function<void(const httplib::Request&, httplib::Response&)> fn) {
    return [&s, fn](const httplib::Request& req, httplib::Response& res) {
      if (s.admit(req, res)) fn(req, res);
    };
  };
  auto model_json = [&s] {
    return json{{"id", s.served_name},
                {"object", "model"},
                {"created", unix_seconds()},
                {"owned_by", "foldserve"},
                {"max_model_len", s.options.engine.context}};
  };
  http.Get("/v1/models", guarded([&s, model_json](const httplib::Request&, httplib::Response& res) {
             s.answer_json(res, {{"object", "list"}, {"data", json::array({model_json()})}});
           }));
  http.Get("/v1/models/(.+)", guarded([&s, model_json](const httplib::Request& req, httplib::Response& res) {
             if (req.matches[1] != s.served_name)
               return s.answer_error(res, not_found("the model '" + std::string(req.matches[1]) +
                                                             "' does not exist", "model_not_found"));
             s.answer_json(res, model_json());
           }));
  http.Get("/metrics", [&s](const httplib::Request& req, httplib::Response& res) {
    if (!s.keys.allows(req.get_header_value("Authorization"), req.get_header_value("x-api-key")))
      return s.answer_error(res, unauthorized());
    EngineStats stats;
    bool have = s.ready.load();
    if (have) stats = s.engine->stats();
    res.set_content(s.metrics.render(have ? &stats : nullptr), "text/plain; version=0.0.4");
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
  int port = s.options.port;
  if (port == 0) port = s.http.bind_to_any_port(s.options.host);
  else if (!s.http.bind_to_port(s.options.host, port)) port = -1;
  if (port <= 0) throw Error("cannot listen on " + s.options.host + ":" + std::to_string(s.options.port));
  s.options.port = port;
  return port;
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
      while (!s.http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      s.http.stop();
    }
  });
  s.http.listen_after_bind();
  load.join();
  std::lock_guard<std::mutex> lock(s.load_mu);
  if (!s.load_error.empty()) throw Error(s.load_error);
}

void Server::stop() {
  if (state_->http.is_running()) state_->http.stop();
}

bool Server::ready() const { return state_->ready.load(); }

}  // namespace fs::server

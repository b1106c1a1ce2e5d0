#pragma once
// What the HTTP routes share: options, the loaded model and engine once ready, keys, metrics, the request log,
// and the drain state of a server that was told to stop.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "engine/loaded_model.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/http/http_server.h"
#include "server/metrics.h"
#include "server/request_log.h"
#include "server/server.h"

namespace fs::server {

struct Server::State {
  explicit State(ServerOptions o);

  ServerOptions options;
  ApiKeys keys;
  Metrics metrics;
  std::unique_ptr<RequestLog> log;
  http::HttpServer http;

  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};       // refusing new work, letting work in flight finish
  std::atomic<bool> abort_streams{false};  // the drain time is over: end what still runs
  std::unique_ptr<LoadedModel> model;
  std::unique_ptr<Engine> engine;
  std::string served_name;
  std::string load_error;
  std::mutex load_mu;

  // Checks the API key, then that the model serves and the server is not draining; fills `res` and returns false
  // otherwise. Runs before a request's body is read.
  bool admit(const http::Request& req, http::Response& res);
  // Writes the OpenAI error body and status (with Retry-After where retrying helps).
  void answer_error(http::Response& res, const ApiError& e);
  // A JSON body with status 200.
  void answer_json(http::Response& res, const nlohmann::json& body);
};

// Registers POST /v1/chat/completions and /v1/completions.
void add_completion_routes(Server::State& state);

}  // namespace fs::server

#pragma once
// What the HTTP routes share: options, the loaded model and engine once ready, keys, metrics, the request log.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include <httplib.h>

#include "engine/loaded_model.h"
#include "server/api_error.h"
#include "server/auth.h"
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
  httplib::Server http;

  std::atomic<bool> ready{false};
  std::unique_ptr<LoadedModel> model;
  std::unique_ptr<Engine> engine;
  std::string served_name;
  std::string load_error;
  std::mutex load_mu;

  // Checks the API key and that the model serves; answers 401 or 503 and returns false otherwise.
  bool admit(const httplib::Request& req, httplib::Response& res);
  // Writes the OpenAI error body and status.
  void answer_error(httplib::Response& res, const ApiError& e);
  // A JSON body with status 200.
  void answer_json(httplib::Response& res, const nlohmann::json& body);
};

// Registers POST /v1/chat/completions and /v1/completions.
void add_completion_routes(Server::State& state);

}  // namespace fs::server

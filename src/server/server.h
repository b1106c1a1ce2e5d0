#pragma once
// The OpenAI-compatible HTTP server: binds first, loads the model in the background (/health answers 503 until it
// serves), then answers /v1/chat/completions, /v1/completions, /v1/models, /health and /metrics; drains on stop.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/image_input.h"

namespace fs {
struct LoadedModel;
}

namespace fs::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8888;  // 0 → any free port
  std::vector<std::string> api_keys;
  std::string request_log;         // "" → none
  std::string served_model_name;   // "" → the model folder's name
  size_t max_body_bytes = 8u << 20;
  int max_connections = 1024;            // open connections in all
  int max_connections_per_client = 256;  // open connections from one address
  std::chrono::milliseconds header_timeout{10000};  // a request's head must arrive within this
  std::chrono::milliseconds body_timeout{60000};    // and its body within this after the head
  int drain_seconds = 10;  // on stop, how long streams in flight may go on
  bool literal_content = false;  // message content is encoded without special-token matching (per request too)
  int max_n = 16;
  EngineOptions engine;
  VisionOptions vision;  // image parts of chat messages
  // Runs after the model (and its vision tower when image input is on) loads and before the engine starts: sizes
  // the engine and checks the memory budget (throwing stops the server with that message).
  std::function<void(const LoadedModel&, EngineOptions&)> prepare_engine;
};

class Server {
 public:
  using Loader = std::function<std::unique_ptr<LoadedModel>()>;
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port; returns the port. Throws fs::Error when it cannot.
  int bind();
  // Loads the model with `loader` on a background thread while serving HTTP on the calling thread until stop().
  // on_ready(url) runs once the model serves. A load that fails stops the server; serve() then throws its error.
  void serve(Loader loader, std::function<void(const std::string& url)> on_ready);
  // Stops at once: streams being written end where they are.
  void stop();
  // Stops gracefully: refuses new work (503, /health says draining), lets streams in flight finish for up to
  // `drain_seconds`, then ends the rest with a final chunk (finish_reason "abort") and [DONE], and stops.
  void drain();
  bool ready() const;
  // The name clients give as "model" (known once the model has loaded).
  std::string served_model() const;

  struct State;  // shared by the route files (server_state.h)

 private:
  std::unique_ptr<State> state_;
};

}  // namespace fs::server

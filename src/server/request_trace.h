#pragma once
// What is known about the request a worker thread is answering: set when it arrives, filled in by the routes,
// read when the response has been written (all three on the thread that answers it).
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

namespace fs::server {

struct RequestTrace {
  std::chrono::steady_clock::time_point start{};
  long long start_unix_ms = 0;
  std::string id;
  std::string route;        // the metric label; "" → derived from the path
  nlohmann::json details = nlohmann::json::object();  // token counts, ttft, finish reasons
};

RequestTrace& current_trace();
// Starts a fresh trace for a request that just arrived.
void begin_trace();

}  // namespace fs::server

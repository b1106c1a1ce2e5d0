#pragma once
// Server-sent events framing for streamed completions.
#include <string>

#include <nlohmann/json.hpp>

namespace fs::server {

// "data: {json}\n\n" — JSON is one line, so one data field per event.
std::string sse_event(const nlohmann::json& payload);
// The terminating event OpenAI clients wait for.
std::string sse_done();
// A comment line clients ignore; written while idle so a departed client is noticed.
std::string sse_heartbeat();

}  // namespace fs::server

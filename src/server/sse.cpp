#include "server/sse.h"

namespace fs::server {

std::string sse_event(const nlohmann::json& payload) {
  // Invalid UTF-8 in generated text is replaced rather than thrown on.
  return "data: " + payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

std::string sse_done() { return "data: [DONE]\n\n"; }

std::string sse_heartbeat() { return ": keep-alive\n\n"; }

}  // namespace fs::server

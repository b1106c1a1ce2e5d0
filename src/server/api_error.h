#pragma once
// An error answered to an HTTP client in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.
#include <string>

#include <nlohmann/json.hpp>

namespace fs::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty → null
  std::string code;   // empty → null

  nlohmann::json to_json() const;
  std::string body() const { return to_json().dump(); }
};

// Thrown inside parsers and handlers; caught at the route and answered as its ApiError.
struct ApiException {
  ApiError error;
};

ApiError bad_request(const std::string& param, const std::string& message);
ApiError unauthorized();
ApiError not_found(const std::string& message, const std::string& code = "not_found");
ApiError too_large(size_t limit);
ApiError queue_full();
ApiError loading();
ApiError server_error(const std::string& message);

}  // namespace fs::server

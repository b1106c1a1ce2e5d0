#include "server/api_error.h"

namespace fs::server {

nlohmann::json ApiError::to_json() const {
  auto null_or = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  return {{"error", {{"message", message}, {"type", type}, {"param", null_or(param)}, {"code", null_or(code)}}}};
}

ApiError bad_request(const std::string& param, const std::string& message) {
  return ApiError{400, message, "invalid_request_error", param, ""};
}

ApiError unauthorized() {
  return ApiError{401, "missing or invalid API key (send Authorization: Bearer KEY or x-api-key: KEY)",
                  "invalid_request_error", "", "invalid_api_key"};
}

ApiError not_found(const std::string& message, const std::string& code) {
  return ApiError{404, message, "invalid_request_error", "", code};
}

ApiError too_large(size_t limit) {
  return ApiError{413, "request body is larger than the limit of " + std::to_string(limit) + " bytes",
                  "invalid_request_error", "", "request_too_large"};
}

ApiError queue_full() {
  return ApiError{429, "the server's queue is full; retry later", "rate_limit_error", "", "queue_full"};
}

ApiError loading() {
  return ApiError{503, "the model is still loading", "server_error", "", "model_loading"};
}

ApiError server_error(const std::string& message) {
  return ApiError{500, message, "server_error", "", "internal_error"};
}

}  // namespace fs::server

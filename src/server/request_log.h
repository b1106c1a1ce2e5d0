#pragma once
// One JSON line per request appended to a file; each line is written by one write() under a lock, so lines never
// interleave.
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace fs::server {

class RequestLog {
 public:
  RequestLog() = default;
  // Opens (creating, appending) PATH; throws fs::Error when it cannot.
  explicit RequestLog(const std::string& path);
  ~RequestLog();
  RequestLog(const RequestLog&) = delete;
  RequestLog& operator=(const RequestLog&) = delete;

  bool enabled() const { return fd_ >= 0; }
  void write(const nlohmann::json& entry);

 private:
  int fd_ = -1;
  std::mutex mu_;
};

}  // namespace fs::server

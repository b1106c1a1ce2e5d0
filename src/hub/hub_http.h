#pragma once
// The few HTTP requests a hub pull makes, over libcurl: a JSON GET, a HEAD that stops at the first redirect, and
// a ranged download appended to an open file.
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace fs::hub {

using Headers = std::map<std::string, std::string>;  // lower-case names

// Why a request got no HTTP answer (or lost it midway).
enum class TransferFailure { none, unreachable, connection_lost, write_failed, other };

struct HttpReply {
  long status = 0;
  Headers headers;      // the first response's: the hub's own, before any redirect to a file store
  std::string body;     // the final response's body (text requests and error answers only)
  TransferFailure failure = TransferFailure::none;
  std::string failure_text;  // curl's words for the failure
  int write_errno = 0;       // errno of a failed write to the file
  uint64_t written = 0;      // bytes appended to the file
  bool restarted = false;    // the server ignored Range and sent the whole file, so the file was emptied first
};

// Called with the bytes of the file present so far.
using ByteProgress = std::function<void(uint64_t have)>;

class HubHttp {
 public:
  // `token` ("" for none) is sent as Authorization: Bearer.
  explicit HubHttp(std::string token);

  // GET following redirects; the body up to `max_bytes`.
  HttpReply get_text(const std::string& url, size_t max_bytes) const;
  // HEAD without following redirects (a redirect's headers carry the hub's file metadata).
  HttpReply head(const std::string& url) const;
  // GET following redirects from byte `offset` (a Range request when > 0), appending the body to `fd`. A 200
  // answer to a ranged request empties the file first.
  HttpReply download(const std::string& url, int fd, uint64_t offset, const ByteProgress& progress) const;

  // `text` escaped for one URL path segment.
  static std::string escape(const std::string& text);

 private:
  std::string token_;
};

}  // namespace fs::hub

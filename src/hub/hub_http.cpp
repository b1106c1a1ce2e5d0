#include "hub/hub_http.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <memory>
#include <mutex>
#include <unistd.h>

#include <curl/curl.h>

namespace fs::hub {
namespace {

constexpr size_t kErrorBodyLimit = 4096;

struct Transfer {
  HttpReply* reply = nullptr;
  CURL* h = nullptr;
  int fd = -1;
  uint64_t offset = 0;
  size_t body_limit = kErrorBodyLimit;
  const ByteProgress* progress = nullptr;
  int responses = 0;
  Headers current;  // headers of the response being received
  bool decided = false, to_file = false;
};

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    ++t->responses;
    t->current.clear();
    return size * n;
  }
  auto colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string name = lower(trim(line.substr(0, colon))), value = trim(line.substr(colon + 1));
  t->current[name] = value;
  if (t->responses == 1) t->reply->headers[name] = value;
  return size * n;
}

// Decides, at the first body byte, whether the body goes to the file (a 200 or a matching 206) or is kept as text.
bool start_body(Transfer& t) {
  t.decided = true;
  if (t.fd < 0) return true;
  long code = 0;
  curl_easy_getinfo(t.h, CURLINFO_RESPONSE_CODE, &code);
  if (code == 206) {
    const std::string expect = "bytes " + std::to_string(t.offset) + "-";
    if (t.current["content-range"].rfind(expect, 0) != 0) {
      t.reply->failure = TransferFailure::other;
      t.reply->failure_text = "the server answered a ranged request with Content-Range '" +
                              t.current["content-range"] + "'";
      return false;
    }
    t.to_file = true;
  } else if (code == 200) {
    if (t.offset > 0) {
      if (::ftruncate(t.fd, 0) != 0) {
        t.reply->failure = TransferFailure::write_failed;
        t.reply->write_errno = errno;
        return false;
      }
      t.offset = 0;
      t.reply->restarted = true;
    }
    t.to_file = true;
  }
  return true;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  if (!t->decided && !start_body(*t)) return 0;
  if (!t->to_file) {
    if (t->reply->body.size() + bytes > t->body_limit) {
      if (t->fd >= 0) return bytes;  // an error answer: its start is enough
      t->reply->failure = TransferFailure::other;
      t->reply->failure_text = "the answer is larger than " + std::to_string(t->body_limit) + " bytes";
      return 0;
    }
    t->reply->body.append(data, bytes);
    return bytes;
  }
  size_t done = 0;
  while (done < bytes) {
    ssize_t w = ::write(t->fd, data + done, bytes - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      t->reply->failure = TransferFailure::write_failed;
      t->reply->write_errno = w < 0 ? errno : ENOSPC;
      return 0;
    }
    done += size_t(w);
  }
  t->reply->written += bytes;
  if (t->progress && *t->progress) (*t->progress)(t->offset + t->reply->written);
  return bytes;
}

TransferFailure classify(CURLcode rc, int responses) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
      return TransferFailure::unreachable;
    case CURLE_OPERATION_TIMEDOUT:
      return responses == 0 ? TransferFailure::unreachable : TransferFailure::connection_lost;
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2_STREAM:
      return TransferFailure::connection_lost;
    default:
      return TransferFailure::other;
  }
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

HttpReply perform(const std::string& url, const std::string& token, Transfer& t, bool head, bool follow,
                  const std::string& range) {
  global_init();
  HttpReply reply;
  t.reply = &reply;
  std::unique_ptr<CURL, void (*)(CURL*)> h(curl_easy_init(), curl_easy_cleanup);
  if (!h) {
    reply.failure = TransferFailure::other;
    reply.failure_text = "cannot start libcurl";
    return reply;
  }
  t.h = h.get();
  curl_slist* list = nullptr;
  if (!token.empty()) list = curl_slist_append(list, ("Authorization: Bearer " + token).c_str());
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> headers(list, curl_slist_free_all);
  char error[CURL_ERROR_SIZE] = {0};
  CURL* c = h.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_USERAGENT, "foldserve/" FOLDSERVE_VERSION);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);  // a stalled transfer fails after a minute
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_NOBODY, head ? 1L : 0L);
  if (!range.empty()) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
  if (rc != CURLE_OK && reply.failure == TransferFailure::none) {
    reply.failure = classify(rc, t.responses);
    reply.failure_text = error[0] ? error : curl_easy_strerror(rc);
  }
  return reply;
}

}  // namespace

HubHttp::HubHttp(std::string token) : token_(std::move(token)) {}

HttpReply HubHttp::get_text(const std::string& url, size_t max_bytes) const {
  Transfer t;
  t.body_limit = max_bytes;
  return perform(url, token_, t, false, true, "");
}

HttpReply HubHttp::head(const std::string& url) const {
  Transfer t;
  return perform(url, token_, t, true, false, "");
}

HttpReply HubHttp::download(const std::string& url, int fd, uint64_t offset, const ByteProgress& progress) const {
  Transfer t;
  t.fd = fd;
  t.offset = offset;
  t.progress = &progress;
  return perform(url, token_, t, false, true, offset > 0 ? std::to_string(offset) + "-" : "");
}

std::string HubHttp::escape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += char(c);
    } else {
      static const char* hex = "0123456789ABCDEF";
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace fs::hub

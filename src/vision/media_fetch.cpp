#include "vision/media_fetch.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

#include <curl/curl.h>

#include "core/error.h"

namespace fs::vision {

namespace {

using Clock = std::chrono::steady_clock;

struct Target {
  std::string scheme, host, port;
  bool numeric_host = false;
};

std::string url_part(CURLU* u, CURLUPart part) {
  char* s = nullptr;
  if (curl_url_get(u, part, &s, part == CURLUPART_PORT ? CURLU_DEFAULT_PORT : 0) != CURLUE_OK || !s) return "";
  std::string out(s);
  curl_free(s);
  return out;
}

Target parse_target(const std::string& url) {
  std::unique_ptr<CURLU, void (*)(CURLU*)> u(curl_url(), curl_url_cleanup);
  if (!u || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK)
    throw Error("invalid image URL: " + url);
  Target t;
  t.scheme = url_part(u.get(), CURLUPART_SCHEME);
  std::transform(t.scheme.begin(), t.scheme.end(), t.scheme.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (t.scheme != "http" && t.scheme != "https")
    throw Error("image URL scheme '" + t.scheme + "' is not supported (http, https or data)");
  t.host = url_part(u.get(), CURLUPART_HOST);
  t.port = url_part(u.get(), CURLUPART_PORT);
  if (t.host.empty()) throw Error("image URL has no host: " + url);
  if (t.host.front() == '[') {
    t.host = t.host.substr(1, t.host.size() - 2);
    t.numeric_host = true;
  }
  std::transform(t.host.begin(), t.host.end(), t.host.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return t;
}

std::vector<std::string> resolve(const Target& t) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(t.host.c_str(), t.port.c_str(), &hints, &res); rc != 0)
    throw Error("cannot resolve image host " + t.host + ": " + gai_strerror(rc));
  std::vector<std::string> out;
  for (addrinfo* a = res; a; a = a->ai_next) {
    char buf[NI_MAXHOST];
    if (getnameinfo(a->ai_addr, a->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) == 0 &&
        std::find(out.begin(), out.end(), buf) == out.end())
      out.emplace_back(buf);
  }
  freeaddrinfo(res);
  if (out.empty()) throw Error("image host " + t.host + " has no addresses");
  return out;
}

struct Sink {
  FetchedMedia* media;
  size_t limit;
  bool over = false;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t bytes = size * n;
  if (sink->media->bytes.size() + bytes > sink->limit) {
    sink->over = true;
    return 0;  // aborts the transfer
  }
  sink->media->bytes.insert(sink->media->bytes.end(), data, data + bytes);
  return bytes;
}

struct Easy {
  CURL* h = curl_easy_init();
  curl_slist* resolve = nullptr;
  ~Easy() {
    curl_slist_free_all(resolve);
    if (h) curl_easy_cleanup(h);
  }
};

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string too_large(size_t limit) {
  return "image at URL is larger than the limit of " + std::to_string(limit) + " bytes";
}

}  // namespace

FetchedMedia fetch_media(const std::string& url, const MediaFetchOptions& opt) {
  if (url.compare(0, 5, "data:") == 0) return decode_data_uri(url, opt.max_bytes);
  global_init();
  const auto deadline = Clock::now() + opt.timeout;
  std::string current = url;
  for (int hop = 0; hop <= opt.max_redirects; ++hop) {
    Target t = parse_target(current);
    if (!domain_allowed(t.host, opt.allowed_domains))
      throw Error("image host " + t.host + " is not in the allowed media domains");
    std::vector<std::string> addrs = t.numeric_host ? std::vector<std::string>{t.host} : resolve(t);
    if (!opt.allow_local)
      for (const auto& a : addrs)
        if (is_non_public_address(a))
          throw Error("image host " + t.host + " resolves to a local or private address (" + a +
                      "); refused (allow it with --media-allow-local)");
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) throw Error("fetching the image URL timed out");

    Easy e;
    if (!e.h) throw Error("cannot start the HTTP client");
    FetchedMedia media;
    Sink sink{&media, opt.max_bytes};
    if (!t.numeric_host) {
      // Pin the connection to the addresses just checked.
      std::string entry = t.host + ":" + t.port + ":";
      for (size_t i = 0; i < addrs.size(); ++i)
        entry += (i ? "," : "") + (addrs[i].find(':') != std::string::npos ? "[" + addrs[i] + "]" : addrs[i]);
      e.resolve = curl_slist_append(nullptr, entry.c_str());
      curl_easy_setopt(e.h, CURLOPT_RESOLVE, e.resolve);
    }
    curl_easy_setopt(e.h, CURLOPT_URL, current.c_str());
    curl_easy_setopt(e.h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e.h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e.h, CURLOPT_PROXY, "");
    curl_easy_setopt(e.h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(e.h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e.h, CURLOPT_TIMEOUT_MS, long(left.count()));
    curl_easy_setopt(e.h, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(opt.max_bytes));
    curl_easy_setopt(e.h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e.h, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(e.h, CURLOPT_USERAGENT, "foldserve");
    CURLcode rc = curl_easy_perform(e.h);
    if (sink.over || rc == CURLE_FILESIZE_EXCEEDED) throw Error(too_large(opt.max_bytes));
    if (rc == CURLE_OPERATION_TIMEDOUT) throw Error("fetching the image URL timed out");
    if (rc != CURLE_OK) throw Error(std::string("cannot fetch the image URL: ") + curl_easy_strerror(rc));
    long status = 0;
    curl_easy_getinfo(e.h, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 300 && status < 400) {
      char* next = nullptr;
      curl_easy_getinfo(e.h, CURLINFO_REDIRECT_URL, &next);
      if (!next) throw Error("image URL redirected (HTTP " + std::to_string(status) + ") without a location");
      current = next;
      continue;
    }
    if (status != 200) throw Error("image URL answered HTTP " + std::to_string(status));
    char* type = nullptr;
    curl_easy_getinfo(e.h, CURLINFO_CONTENT_TYPE, &type);
    if (type) media.content_type = type;
    if (media.bytes.empty()) throw Error("image URL returned no data");
    return media;
  }
  throw Error("image URL redirected more than " + std::to_string(opt.max_redirects) + " times");
}

}  // namespace fs::vision

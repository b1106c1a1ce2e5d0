#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "core/error.h"
#include "vision/image.h"
#include "vision/media_fetch.h"
#include "vision_fixtures.h"

namespace fs::vision {
namespace {

std::string error_of(const std::string& url, const MediaFetchOptions& opt) {
  try {
    fetch_media(url, opt);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string base64(const std::vector<uint8_t>& b) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string s;
  size_t i = 0;
  for (; i + 2 < b.size(); i += 3) {
    uint32_t v = uint32_t(b[i]) << 16 | uint32_t(b[i + 1]) << 8 | b[i + 2];
    for (int k = 18; k >= 0; k -= 6) s += a[(v >> k) & 63];
  }
  if (i < b.size()) {
    uint32_t v = uint32_t(b[i]) << 16 | (i + 1 < b.size() ? uint32_t(b[i + 1]) << 8 : 0);
    s += a[(v >> 18) & 63];
    s += a[(v >> 12) & 63];
    s += i + 1 < b.size() ? a[(v >> 6) & 63] : '=';
    s += '=';
  }
  return s;
}

int free_port() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

bool can_connect(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(s);
  return ok;
}

// python3 -m http.server serving the shared fixtures on 127.0.0.1.
class LocalServer {
 public:
  explicit LocalServer(const std::filesystem::path& root) : port_(free_port()) {
    pid_ = fork();
    if (pid_ == 0) {
      std::string port = std::to_string(port_), dir = root.string();
      freopen("/dev/null", "w", stderr);
      execlp("python3", "python3", "-m", "http.server", port.c_str(), "--bind", "127.0.0.1", "--directory", dir.c_str(),
             static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 600 && !can_connect(port_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ~LocalServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool up() const { return can_connect(port_); }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  int port() const { return port_; }

 private:
  int port_;
  pid_t pid_ = -1;
};

TEST(MediaFetch, DataUriBase64AndPercentEncoded) {
  FS_REQUIRE_SHARED(shared);
  auto bytes = test::file_bytes(shared / "images/odd97x61.webp");
  MediaFetchOptions opt;
  auto m = fetch_media("data:image/webp;base64," + base64(bytes), opt);
  EXPECT_EQ(m.bytes, bytes);
  EXPECT_EQ(m.content_type, "image/webp");
  EXPECT_EQ(decode_image(m.bytes).width, 97);
  EXPECT_EQ(fetch_media("data:,a%20b", opt).bytes, (std::vector<uint8_t>{'a', ' ', 'b'}));
  EXPECT_NE(error_of("data:image/png;base64,ab$d", opt).find("base64"), std::string::npos);
  EXPECT_NE(error_of("data:image/png;base64", opt).find("','"), std::string::npos);
  EXPECT_NE(error_of("data:image/png;base64,", opt).find("empty"), std::string::npos);
  opt.max_bytes = 100;
  EXPECT_NE(error_of("data:image/webp;base64," + base64(bytes), opt).find("limit"), std::string::npos);
}

TEST(MediaFetch, RefusesOtherSchemesAndBadUrls) {
  MediaFetchOptions opt;
  EXPECT_NE(error_of("file:///etc/passwd", opt).find("scheme"), std::string::npos);
  EXPECT_NE(error_of("ftp://example.com/a.png", opt).find("scheme"), std::string::npos);
  EXPECT_NE(error_of("not a url", opt).find("invalid"), std::string::npos);
}

TEST(MediaFetch, AddressPolicy) {
  for (const char* a : {"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
                        "0.0.0.0", "224.0.0.1", "::1", "::", "fe80::1", "fd00::1", "::ffff:127.0.0.1",
                        "::ffff:10.0.0.1", "64:ff9b::a00:1", "ff02::1"})
    EXPECT_TRUE(is_non_public_address(a)) << a;
  for (const char* a : {"8.8.8.8", "1.1.1.1", "172.32.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"})
    EXPECT_FALSE(is_non_public_address(a)) << a;
  EXPECT_TRUE(domain_allowed("img.example.com", {"example.com"}));
  EXPECT_TRUE(domain_allowed("EXAMPLE.com.", {"example.com"}));
  EXPECT_FALSE(domain_allowed("badexample.com", {"example.com"}));
  EXPECT_FALSE(domain_allowed("example.com.evil.net", {"example.com"}));
  EXPECT_TRUE(domain_allowed("anything.net", {}));
}

TEST(MediaFetch, LocalServerAllowedOnlyWithAllowLocal) {
  FS_REQUIRE_SHARED(shared);
  LocalServer server(shared);
  ASSERT_TRUE(server.up()) << "python3 -m http.server did not start";
  auto want = test::file_bytes(shared / "images/photo320x208.jpg");
  MediaFetchOptions opt;
  opt.allow_local = true;
  auto m = fetch_media(server.url("/images/photo320x208.jpg"), opt);
  EXPECT_EQ(m.bytes, want);
  EXPECT_EQ(decode_image(m.bytes).width, 320);
  // localhost resolves to loopback too; pinned to the checked address.
  EXPECT_EQ(fetch_media("http://localhost:" + std::to_string(server.port()) + "/images/photo320x208.jpg", opt).bytes,
            want);

  EXPECT_NE(error_of(server.url("/images/missing.png"), opt).find("HTTP 404"), std::string::npos);
  // http.server answers a folder without its slash with a 301 to the slash form.
  EXPECT_FALSE(fetch_media(server.url("/images"), opt).bytes.empty());
  MediaFetchOptions no_redirects = opt;
  no_redirects.max_redirects = 0;
  EXPECT_NE(error_of(server.url("/images"), no_redirects).find("redirected more than 0"), std::string::npos);
  MediaFetchOptions small = opt;
  small.max_bytes = 1000;
  EXPECT_NE(error_of(server.url("/images/photo320x208.jpg"), small).find("limit"), std::string::npos);
  MediaFetchOptions listed = opt;
  listed.allowed_domains = {"example.com"};
  EXPECT_NE(error_of(server.url("/images/photo320x208.jpg"), listed).find("allowed media domains"), std::string::npos);

  MediaFetchOptions strict;
  EXPECT_NE(error_of(server.url("/images/photo320x208.jpg"), strict).find("local or private"), std::string::npos);
  EXPECT_NE(error_of("http://localhost:" + std::to_string(server.port()) + "/images/photo320x208.jpg", strict)
                .find("local or private"),
            std::string::npos);
  EXPECT_NE(error_of("http://[::1]:" + std::to_string(server.port()) + "/x.png", strict).find("local or private"),
            std::string::npos);
}

TEST(MediaFetch, TimeLimit) {
  // A listening socket that never answers: the connection is accepted by the kernel, the reply never comes.
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(s, 4), 0);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  MediaFetchOptions opt;
  opt.allow_local = true;
  opt.timeout = std::chrono::milliseconds(300);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(error_of("http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/a.png", opt).find("timed out"),
            std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  close(s);
}

}  // namespace
}  // namespace fs::vision

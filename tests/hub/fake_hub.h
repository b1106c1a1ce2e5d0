#pragma once
// A Hugging Face hub on 127.0.0.1 for tests: the model-info API, resolve URLs with the hub's headers (LFS files
// redirect to a file store), and switches for failures (a cut connection, a corrupted file, refusals).
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
}

namespace fs::test {

struct FakeHubFile {
  std::string bytes;
  bool lfs = false;  // served through a redirect with X-Linked-Etag (its sha256) and X-Linked-Size
};

class FakeHub {
 public:
  // Serves `files` as repo `repo_id` at commit `commit` (branch main).
  FakeHub(std::string repo_id, std::string commit, std::map<std::string, FakeHubFile> files);
  ~FakeHub();

  std::string endpoint() const;
  // Every request as "METHOD PATH" plus " range=VALUE" when it had a Range header.
  std::vector<std::string> requests() const;
  void clear_requests();

  // The next download of this file stops halfway through and drops the connection.
  void cut_next_download(const std::string& file);
  // Downloads of this file have one byte changed (its advertised sha256 stays the true one); "" turns it off.
  void corrupt(const std::string& file);
  // Every request gets this status (401, 403, 404) until set back to 0.
  void refuse_with(int status);
  // Requests without "Authorization: Bearer TOKEN" get 401; "" turns it off.
  void require_token(const std::string& token);
  // Files listed in the model info but never served (a server does not need them).
  void add_listed_only(const std::string& file);

  static std::string sha256_hex(const std::string& bytes);

 private:
  void route();

  std::string repo_id_, commit_;
  std::map<std::string, FakeHubFile> files_;
  std::vector<std::string> listed_only_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
  std::string cut_file_, corrupt_file_, token_;
  int refuse_status_ = 0;
};

}  // namespace fs::test

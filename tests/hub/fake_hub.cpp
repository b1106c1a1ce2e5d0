#include "hub/fake_hub.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/sha256.h"

namespace fs::test {
namespace {

// "TEXT" with its double quotes, as ETags are sent.
std::string quoted(const std::string& text) {
  std::string out(1, '"');
  out.append(text).push_back('"');
  return out;
}

void set_error(httplib::Response& res, int status, const std::string& code, const std::string& message) {
  res.status = status;
  res.set_header("X-Error-Code", code);
  res.set_header("X-Error-Message", message);
  res.set_content(nlohmann::json{{"error", message}}.dump(), "application/json");
}

}  // namespace

std::string FakeHub::sha256_hex(const std::string& bytes) {
  Sha256 h;
  h.update(bytes.data(), bytes.size());
  return Sha256::hex(h.finish());
}

FakeHub::FakeHub(std::string repo_id, std::string commit, std::map<std::string, FakeHubFile> files)
    : repo_id_(std::move(repo_id)), commit_(std::move(commit)), files_(std::move(files)),
      server_(std::make_unique<httplib::Server>()) {
  route();
  port_ = server_->bind_to_any_port("127.0.0.1");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

FakeHub::~FakeHub() {
  server_->stop();
  thread_.join();
}

std::string FakeHub::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::vector<std::string> FakeHub::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void FakeHub::clear_requests() {
  std::lock_guard<std::mutex> lock(mu_);
  requests_.clear();
}

void FakeHub::cut_next_download(const std::string& file) {
  std::lock_guard<std::mutex> lock(mu_);
  cut_file_ = file;
}

void FakeHub::corrupt(const std::string& file) {
  std::lock_guard<std::mutex> lock(mu_);
  corrupt_file_ = file;
}

void FakeHub::refuse_with(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  refuse_status_ = status;
}

void FakeHub::require_token(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  token_ = token;
}

void FakeHub::add_listed_only(const std::string& file) { listed_only_.push_back(file); }

void FakeHub::route() {
  // Logs each request, then answers refusals and missing tokens before any route runs.
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    std::string line = req.method + " " + req.path;
    if (req.has_header("Range")) line += " range=" + req.get_header_value("Range");
    requests_.push_back(line);
    if (refuse_status_ == 401) set_error(res, 401, "RepoNotFound", "Invalid username or password.");
    else if (refuse_status_ == 403) set_error(res, 403, "GatedRepo", "Access to model " + repo_id_ + " is restricted.");
    else if (refuse_status_ == 404) set_error(res, 404, "RepoNotFound", "Repository not found");
    else if (!token_.empty() && req.get_header_value("Authorization") != "Bearer " + token_)
      set_error(res, 401, "RepoNotFound", "Invalid credentials in Authorization header");
    else return httplib::Server::HandlerResponse::Unhandled;
    return httplib::Server::HandlerResponse::Handled;
  });

  server_->Get(R"(/api/models/([^/]+/[^/]+)/revision/(.+))", [this](const httplib::Request& req,
                                                                      httplib::Response& res) {
    if (req.matches[1] != repo_id_) return set_error(res, 404, "RepoNotFound", "Repository not found");
    if (req.matches[2] != "main" && req.matches[2] != commit_)
      return set_error(res, 404, "RevisionNotFound", "Invalid rev id: " + req.matches[2].str());
    nlohmann::json siblings = nlohmann::json::array();
    for (const auto& [name, _] : files_) siblings.push_back({{"rfilename", name}});
    for (const auto& name : listed_only_) siblings.push_back({{"rfilename", name}});
    nlohmann::json info = {{"id", repo_id_}, {"sha", commit_}, {"siblings", siblings}};
    res.set_content(info.dump(), "application/json");
  });

  server_->Get(R"(/([^/]+/[^/]+)/resolve/([^/]+)/(.+))", [this](const httplib::Request& req,
                                                                 httplib::Response& res) {
    auto it = files_.find(req.matches[3]);
    if (req.matches[1] != repo_id_) return set_error(res, 404, "RepoNotFound", "Repository not found");
    if (req.matches[2] != commit_) return set_error(res, 404, "RevisionNotFound", "Invalid rev id");
    if (it == files_.end()) return set_error(res, 404, "EntryNotFound", "Entry not found");
    const std::string sha = sha256_hex(it->second.bytes);
    res.set_header("X-Repo-Commit", commit_);
    if (it->second.lfs) {
      res.set_header("X-Linked-Etag", quoted(sha));
      res.set_header("X-Linked-Size", std::to_string(it->second.bytes.size()));
      res.set_header("ETag", quoted(sha));
      res.set_redirect(endpoint() + "/cdn/" + sha, 302);
      return;
    }
    // The hub's ETag of a small file is its git object id; any stable 40-hex name serves the client the same.
    res.set_header("ETag", quoted(sha.substr(0, 40)));
    res.set_content(it->second.bytes, "application/octet-stream");
  });

  server_->Get(R"(/cdn/([0-9a-f]{64}))", [this](const httplib::Request& req, httplib::Response& res) {
    std::string name;
    for (const auto& [n, f] : files_)
      if (f.lfs && sha256_hex(f.bytes) == req.matches[1]) name = n;
    if (name.empty()) return set_error(res, 404, "EntryNotFound", "no such object");
    auto bytes = std::make_shared<std::string>(files_.at(name).bytes);
    bool cut = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (corrupt_file_ == name) (*bytes)[bytes->size() / 2] ^= 0x5a;
      cut = cut_file_ == name;
      if (cut) cut_file_.clear();
    }
    if (!cut) return res.set_content(*bytes, "application/octet-stream");
    const size_t half = bytes->size() / 2;
    res.set_content_provider(bytes->size(), "application/octet-stream",
                             [bytes, half](size_t offset, size_t length, httplib::DataSink& sink) {
                               if (offset >= half) return false;  // drops the connection
                               sink.write(bytes->data() + offset, std::min(length, half - offset));
                               return true;
                             });
  });
}

}  // namespace fs::test

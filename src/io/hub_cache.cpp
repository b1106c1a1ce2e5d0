#include "io/hub_cache.h"

#include <cctype>
#include <cstdlib>

#include "core/error.h"
#include "core/files.h"

namespace fs {
namespace stdfs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool valid_repo_part(const std::string& s) {
  if (s.empty() || s.size() > 96 || s[0] == '.' || s[0] == '-') return false;
  if (s.find("..") != std::string::npos || s.find("--") != std::string::npos) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t k = 0;
  while (k < s.size() && std::isspace(static_cast<unsigned char>(s[k]))) ++k;
  return s.substr(k);
}

}  // namespace

stdfs::path hub_cache_root() {
  if (auto v = env("HF_HUB_CACHE"); !v.empty()) return v;
  if (auto v = env("HF_HOME"); !v.empty()) return stdfs::path(v) / "hub";
  auto home = env("HOME");
  return stdfs::path(home.empty() ? "/" : home) / ".cache" / "huggingface" / "hub";
}

bool looks_like_repo_id(const std::string& text) {
  auto slash = text.find('/');
  if (slash == std::string::npos || text.find('/', slash + 1) != std::string::npos) return false;
  return valid_repo_part(text.substr(0, slash)) && valid_repo_part(text.substr(slash + 1));
}

stdfs::path hub_repo_folder(const stdfs::path& root, const std::string& repo_id) {
  if (!looks_like_repo_id(repo_id)) throw Error("'" + repo_id + "' is not a hub model name of the form ORG/NAME");
  auto slash = repo_id.find('/');
  return root / ("models--" + repo_id.substr(0, slash) + "--" + repo_id.substr(slash + 1));
}

bool is_valid_revision(const std::string& r) {
  if (r.empty() || r.front() == '/' || r.back() == '/') return false;
  for (const auto& part : stdfs::path(r))
    if (part == ".." || part == "." || part.empty()) return false;
  return true;
}

bool is_commit_hash(const std::string& text) {
  if (text.size() != 40) return false;
  for (char c : text)
    if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c))) return false;
  return true;
}

stdfs::path hub_snapshot_dir(const stdfs::path& root, const std::string& repo_id, const std::string& revision_in) {
  const std::string revision = revision_in.empty() ? "main" : revision_in;
  if (!is_valid_revision(revision)) throw Error("--revision '" + revision + "' is not a valid ref or commit");
  const stdfs::path repo = hub_repo_folder(root, repo_id);
  const std::string pull_hint = "; download it with: foldserve pull " + repo_id +
                                (revision_in.empty() ? "" : " --revision " + revision_in);
  std::error_code ec;
  if (!stdfs::is_directory(repo, ec))
    throw Error(repo_id + " is not in the Hugging Face cache (looked in " + repo.string() + ")" + pull_hint);
  std::string commit = revision;
  const stdfs::path ref = repo / "refs" / revision;
  if (stdfs::is_regular_file(ref, ec)) {
    commit = trim(read_file(ref));
    if (!is_valid_revision(commit) || commit.find('/') != std::string::npos)
      throw Error(ref.string() + ": does not hold a commit hash");
  }
  const stdfs::path snapshot = repo / "snapshots" / commit;
  if (!stdfs::is_directory(snapshot, ec))
    throw Error(repo_id + " revision " + revision + " is not in the Hugging Face cache (looked for " +
                snapshot.string() + ")" + pull_hint);
  return snapshot;
}

stdfs::path resolve_model_location(const std::string& model, const std::string& revision) {
  std::error_code ec;
  const bool local = !model.empty() && stdfs::is_directory(model, ec);
  if (!local && looks_like_repo_id(model)) return hub_snapshot_dir(hub_cache_root(), model, revision);
  if (!revision.empty())
    throw Error("--revision applies to hub model names of the form ORG/NAME" +
                (model.empty() ? std::string() : ", not to '" + model + "'"));
  return model;
}

}  // namespace fs

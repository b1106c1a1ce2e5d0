#include "hub/hub_pull.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <unistd.h>

#include "core/error.h"
#include "core/files.h"
#include "core/sha256.h"
#include "hub/hub_answers.h"
#include "hub/hub_http.h"
#include "io/hub_cache.h"

namespace fs::hub {
namespace stdfs = std::filesystem;

namespace {

constexpr size_t kModelInfoLimit = 64u << 20;
constexpr const char* kIndexFile = "model.safetensors.index.json";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What the hub's HEAD of one file says about it.
struct FileMeta {
  std::string name, etag, sha256;  // sha256: set for LFS files (their linked etag)
  bool size_known = false;
  uint64_t size = 0;
};

struct Pull {
  const PullOptions& opt;
  PullProgress& progress;
  HubRequestContext context;
  HubHttp http;
  std::string commit;
  stdfs::path repo_dir, snapshot;

  std::string resolve_url(const std::string& file) const {
    return context.endpoint + "/" + opt.repo_id + "/resolve/" + commit + "/" + HubHttp::escape(file);
  }
  FileMeta head(const std::string& file);
  // Downloads (or finds) one file and links it into the snapshot; true when bytes were fetched.
  bool fetch(const FileMeta& meta);
  void link(const FileMeta& meta) const;
  std::vector<std::string> list_files();
  std::set<std::string> shards_named_by_index() const;
  void check_free_space(const std::vector<FileMeta>& metas) const;
  void write_ref() const;
};

std::string clean_etag(std::string e) {
  if (e.rfind("W/", 0) == 0) e = e.substr(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return e;
}

bool safe_blob_name(const std::string& e) {
  if (e.empty() || e.size() > 200 || e[0] == '.') return false;
  return std::all_of(e.begin(), e.end(), [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_'; });
}

bool is_sha256_hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c); });
}

std::string file_sha256(const stdfs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path.string() + " to verify it");
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    h.update(buf.data(), size_t(in.gcount()));
  }
  return Sha256::hex(h.finish());
}

uint64_t size_or_zero(const stdfs::path& p) {
  std::error_code ec;
  if (!stdfs::is_regular_file(p, ec)) return 0;
  auto n = stdfs::file_size(p, ec);
  return ec ? 0 : n;
}

FileMeta Pull::head(const std::string& file) {
  HttpReply r = http.head(resolve_url(file));
  auto get = [&](const char* name) {
    auto it = r.headers.find(name);
    return it == r.headers.end() ? std::string() : it->second;
  };
  // A redirect within the hub (a renamed repo) is followed; one to a file store carries the metadata itself.
  for (int hop = 0; hop < 5 && r.status >= 300 && r.status < 400 && get("location").rfind("/", 0) == 0; ++hop)
    r = http.head(context.endpoint + get("location"));
  check_hub_reply(r, context, file, true);
  FileMeta m;
  m.name = file;
  std::string linked = clean_etag(get("x-linked-etag"));
  m.etag = linked.empty() ? clean_etag(get("etag")) : linked;
  if (!safe_blob_name(m.etag))
    throw Error(context.endpoint + " sent no usable ETag for " + file + " of " + opt.repo_id + " ('" + m.etag + "')");
  if (is_sha256_hex(linked)) m.sha256 = linked;
  std::string size = get("x-linked-size");
  if (size.empty() && r.status >= 200 && r.status < 300) size = get("content-length");
  if (!size.empty()) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(size.c_str(), &end, 10);
    if (end && *end == '\0') m.size = v, m.size_known = true;
  }
  return m;
}

void Pull::link(const FileMeta& meta) const {
  stdfs::path at = snapshot / meta.name;
  std::error_code ec;
  stdfs::remove(at, ec);
  stdfs::create_symlink(stdfs::path("../../blobs") / meta.etag, at, ec);
  if (ec) throw Error("cannot link " + at.string() + ": " + ec.message());
}

bool Pull::fetch(const FileMeta& meta) {
  const stdfs::path blob = repo_dir / "blobs" / meta.etag;
  std::error_code ec;
  if (stdfs::is_regular_file(blob, ec) && (!meta.size_known || stdfs::file_size(blob, ec) == meta.size)) {
    progress.file_cached(meta.name, stdfs::file_size(blob, ec));
    link(meta);
    return false;
  }
  const stdfs::path part = repo_dir / "blobs" / (meta.etag + ".incomplete");
  uint64_t have = size_or_zero(part);
  if (meta.size_known && have > meta.size) stdfs::remove(part, ec), have = 0;
  int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error(std::string(errno == ENOSPC ? "disk full: " : "") + "cannot create " + part.string() + ": " +
                std::strerror(errno));
  progress.file_started(meta.name, meta.size, have);
  HttpReply r;
  if (!(meta.size_known && have == meta.size))
    r = http.download(resolve_url(meta.name), fd, have, [&](uint64_t n) { progress.file_advanced(n); });
  const int close_errno = ::close(fd) == 0 ? 0 : errno;
  if (r.failure == TransferFailure::none && close_errno) {
    r.failure = TransferFailure::write_failed;
    r.write_errno = close_errno;
  }
  if (r.failure != TransferFailure::none || (r.status != 0 && (r.status < 200 || r.status >= 300))) {
    progress.interrupt();
    check_hub_reply(r, context, meta.name);
  }
  const uint64_t got = size_or_zero(part);
  if (meta.size_known && got != meta.size) {
    progress.interrupt();
    stdfs::remove(part, ec);
    throw Error(meta.name + " of " + opt.repo_id + ": downloaded " + std::to_string(got) + " bytes but the hub said " +
                std::to_string(meta.size) + "; the bad download was removed, run the same command again");
  }
  if (!meta.sha256.empty()) {
    std::string actual = file_sha256(part);
    if (actual != meta.sha256) {
      progress.interrupt();
      stdfs::remove(part, ec);
      throw Error(meta.name + " of " + opt.repo_id + " failed verification: its sha256 is " + actual +
                  " but the hub says " + meta.sha256 + "; the bad download was removed, run the same command again");
    }
  }
  stdfs::rename(part, blob, ec);
  if (ec) throw Error("cannot move " + part.string() + " to " + blob.string() + ": " + ec.message());
  progress.file_finished();
  link(meta);
  return true;
}

std::vector<std::string> Pull::list_files() {
  std::string url = context.endpoint + "/api/models/" + opt.repo_id + "/revision/" + HubHttp::escape(context.revision);
  HttpReply r = http.get_text(url, kModelInfoLimit);
  check_hub_reply(r, context, "");
  json info;
  try {
    info = json::parse(r.body);
  } catch (const std::exception& e) {
    throw Error(url + ": the hub's answer is not JSON: " + e.what());
  }
  if (!info.is_object() || !info.contains("sha") || !info["sha"].is_string() ||
      !is_commit_hash(info["sha"].get<std::string>()))
    throw Error(url + ": the hub's answer has no commit \"sha\"");
  commit = info["sha"].get<std::string>();
  std::vector<std::string> files;
  if (info.contains("siblings") && info["siblings"].is_array())
    for (const auto& s : info["siblings"])
      if (s.is_object() && s.contains("rfilename") && s["rfilename"].is_string() &&
          is_needed_file(s["rfilename"].get<std::string>()))
        files.push_back(s["rfilename"].get<std::string>());
  return files;
}

std::set<std::string> Pull::shards_named_by_index() const {
  json index = read_json_file(snapshot / kIndexFile);
  std::set<std::string> shards;
  if (index.contains("weight_map") && index["weight_map"].is_object())
    for (const auto& [_, file] : index["weight_map"].items())
      if (file.is_string()) shards.insert(file.get<std::string>());
  return shards;
}

void Pull::check_free_space(const std::vector<FileMeta>& metas) const {
  uint64_t need = 0;
  std::error_code ec;
  for (const auto& m : metas)
    if (m.size_known && !stdfs::is_regular_file(repo_dir / "blobs" / m.etag, ec))
      need += m.size - std::min(m.size, size_or_zero(repo_dir / "blobs" / (m.etag + ".incomplete")));
  auto space = stdfs::space(repo_dir / "blobs", ec);
  if (!ec && need > space.available)
    throw Error("disk full: " + opt.repo_id + " needs " + format_bytes(need) + " more but only " +
                format_bytes(space.available) + " are free in " + (repo_dir / "blobs").string());
}

void Pull::write_ref() const {
  if (context.revision == commit) return;
  stdfs::path ref = repo_dir / "refs" / context.revision;
  stdfs::create_directories(ref.parent_path());
  stdfs::path tmp = ref.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << commit;
    if (!out.flush()) throw Error("cannot write " + tmp.string());
  }
  std::error_code ec;
  stdfs::rename(tmp, ref, ec);
  if (ec) throw Error("cannot write " + ref.string() + ": " + ec.message());
}

}  // namespace

bool is_needed_file(const std::string& name) {
  static const std::set<std::string> named = {kIndexFile,
                                              "config.json",
                                              "tokenizer.json",
                                              "tokenizer_config.json",
                                              "chat_template.jinja",
                                              "chat_template.json",
                                              "generation_config.json",
                                              "preprocessor_config.json",
                                              "special_tokens_map.json"};
  if (name.find('/') != std::string::npos) return false;  // the loader reads the top folder only
  return named.count(name) || ends_with(name, ".safetensors");
}

std::string hub_token() {
  if (auto t = env("HF_TOKEN"); !t.empty()) return t;
  stdfs::path file = env("HF_TOKEN_PATH");
  if (file.empty())
    file = !env("HF_HOME").empty() ? stdfs::path(env("HF_HOME")) / "token"
                                   : stdfs::path(env("HOME")) / ".cache" / "huggingface" / "token";
  std::ifstream in(file);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  return token;
}

std::string hub_endpoint() {
  std::string e = env("HF_ENDPOINT");
  if (e.empty()) e = "https://huggingface.co";
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

PullResult pull_model(const PullOptions& opt, PullProgress& progress) {
  if (!looks_like_repo_id(opt.repo_id))
    throw Error("'" + opt.repo_id + "' is not a hub model name of the form ORG/NAME");
  const std::string token = opt.token.empty() ? hub_token() : opt.token;
  HubRequestContext context{opt.endpoint.empty() ? hub_endpoint() : opt.endpoint,
                            opt.repo_id, opt.revision.empty() ? "main" : opt.revision, !token.empty()};
  Pull p{opt, progress, context, HubHttp(token), "", {}, {}};
  if (!is_valid_revision(context.revision))
    throw Error("--revision '" + context.revision + "' is not a valid ref or commit");
  std::vector<std::string> files = p.list_files();
  if (std::none_of(files.begin(), files.end(), [](const std::string& f) { return ends_with(f, ".safetensors"); }))
    throw Error(opt.repo_id + " has no .safetensors weights at its top level (foldserve loads safetensors only)");
  if (std::find(files.begin(), files.end(), "config.json") == files.end())
    throw Error(opt.repo_id + " has no config.json: it is not a checkpoint foldserve can load");

  p.repo_dir = hub_repo_folder(opt.cache_root.empty() ? hub_cache_root() : opt.cache_root, opt.repo_id);
  p.snapshot = p.repo_dir / "snapshots" / p.commit;
  std::error_code ec;
  stdfs::create_directories(p.repo_dir / "blobs", ec);
  stdfs::create_directories(p.snapshot, ec);
  if (ec) throw Error("cannot create " + p.snapshot.string() + ": " + ec.message());

  PullResult result;
  auto count = [&](bool fetched) { ++(fetched ? result.downloaded : result.cached); };
  // The index comes first: when present it names the shards worth fetching (repos may hold other weight files).
  if (std::find(files.begin(), files.end(), kIndexFile) != files.end()) {
    count(p.fetch(p.head(kIndexFile)));
    std::set<std::string> shards = p.shards_named_by_index();
    std::erase_if(files, [&](const std::string& f) {
      return f == kIndexFile || (ends_with(f, ".safetensors") && !shards.count(f));
    });
  }
  std::vector<FileMeta> metas;
  for (const auto& f : files) metas.push_back(p.head(f));
  // Small files first, so a checkpoint's description lands before its weights.
  std::stable_sort(metas.begin(), metas.end(), [](const FileMeta& a, const FileMeta& b) {
    return ends_with(a.name, ".safetensors") < ends_with(b.name, ".safetensors");
  });
  p.check_free_space(metas);
  for (const auto& m : metas) count(p.fetch(m));
  p.write_ref();
  result.snapshot = p.snapshot;
  result.commit = p.commit;
  return result;
}

}  // namespace fs::hub

// Hub-cache resolution: the cache root from HF_HUB_CACHE / HF_HOME / HOME, refs and commits, local folders first,
// clear errors, and checkpoints whose files are symlinks into blobs/.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <unistd.h>

#include "core/error.h"
#include "core/files.h"
#include "io/hub_cache.h"
#include "io/safetensors.h"
#include "support/fixtures.h"

namespace fs {
namespace {
namespace stdfs = std::filesystem;

// Sets an environment variable (or unsets it with nullopt) for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class HubCache : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = stdfs::temp_directory_path() / ("fs-hub-cache-" + std::to_string(::getpid()) + "-" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    stdfs::remove_all(root_);
    stdfs::create_directories(root_);
  }
  void TearDown() override { stdfs::remove_all(root_); }

  // A snapshot folder for `commit` holding one file, with refs/REF naming it when `ref` is given.
  stdfs::path add_snapshot(const stdfs::path& cache, const std::string& commit, const std::string& ref) {
    stdfs::path repo = cache / "models--acme--tiny";
    stdfs::create_directories(repo / "snapshots" / commit);
    std::ofstream(repo / "snapshots" / commit / "config.json") << "{\"commit\":\"" << commit << "\"}";
    if (!ref.empty()) {
      stdfs::create_directories((repo / "refs" / ref).parent_path());
      std::ofstream(repo / "refs" / ref) << commit << "\n";
    }
    return repo / "snapshots" / commit;
  }

  stdfs::path root_;
};

const std::string kMainCommit(40, 'a');
const std::string kOtherCommit(40, 'b');

TEST_F(HubCache, RootFollowsHfHubCacheThenHfHomeThenHome) {
  ScopedEnv home("HOME", (root_ / "home").string());
  {
    ScopedEnv a("HF_HUB_CACHE", (root_ / "hubcache").string());
    ScopedEnv b("HF_HOME", (root_ / "hfhome").string());
    EXPECT_EQ(hub_cache_root(), root_ / "hubcache");
  }
  {
    ScopedEnv a("HF_HUB_CACHE", std::nullopt);
    ScopedEnv b("HF_HOME", (root_ / "hfhome").string());
    EXPECT_EQ(hub_cache_root(), root_ / "hfhome" / "hub");
  }
  ScopedEnv a("HF_HUB_CACHE", std::nullopt);
  ScopedEnv b("HF_HOME", std::nullopt);
  EXPECT_EQ(hub_cache_root(), root_ / "home" / ".cache" / "huggingface" / "hub");
}

TEST_F(HubCache, RecognisesRepoIds) {
  for (const char* good : {"Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct", "a/b", "org_x/name.v2"})
    EXPECT_TRUE(looks_like_repo_id(good)) << good;
  for (const char* bad : {"", "Qwen", "/abs/path", "a/b/c", "./x", "../x", "a/..", "org/-x", "a--b/c", "a/b c", "a/"})
    EXPECT_FALSE(looks_like_repo_id(bad)) << bad;
}

TEST_F(HubCache, MainRefNamesTheSnapshot) {
  add_snapshot(root_, kOtherCommit, "");
  auto main = add_snapshot(root_, kMainCommit, "main");
  EXPECT_EQ(hub_snapshot_dir(root_, "acme/tiny", ""), main);
}

TEST_F(HubCache, RevisionIsARefOrACommit) {
  auto main = add_snapshot(root_, kMainCommit, "main");
  auto other = add_snapshot(root_, kOtherCommit, "v2");
  EXPECT_EQ(hub_snapshot_dir(root_, "acme/tiny", "v2"), other);
  EXPECT_EQ(hub_snapshot_dir(root_, "acme/tiny", kOtherCommit), other);
  EXPECT_EQ(hub_snapshot_dir(root_, "acme/tiny", "main"), main);
  EXPECT_THROW(hub_snapshot_dir(root_, "acme/tiny", "../../etc"), Error);
}

TEST_F(HubCache, ResolvesThroughTheEnvironment) {
  auto main = add_snapshot(root_ / "hfhome" / "hub", kMainCommit, "main");
  ScopedEnv a("HF_HUB_CACHE", std::nullopt);
  ScopedEnv b("HF_HOME", (root_ / "hfhome").string());
  EXPECT_EQ(resolve_model_location("acme/tiny", ""), main);
  auto other = add_snapshot(root_ / "hubcache", kOtherCommit, "main");
  ScopedEnv c("HF_HUB_CACHE", (root_ / "hubcache").string());
  EXPECT_EQ(resolve_model_location("acme/tiny", ""), other);
}

TEST_F(HubCache, ALocalFolderWinsOverAHubName) {
  add_snapshot(root_ / "cache", kMainCommit, "main");
  ScopedEnv a("HF_HUB_CACHE", (root_ / "cache").string());
  stdfs::create_directories(root_ / "acme" / "tiny");
  const auto cwd = stdfs::current_path();
  stdfs::current_path(root_);
  stdfs::path got = resolve_model_location("acme/tiny", "");
  stdfs::current_path(cwd);
  EXPECT_EQ(got, stdfs::path("acme/tiny"));
}

TEST_F(HubCache, MissingModelNamesThePathAndSuggestsPull) {
  ScopedEnv a("HF_HUB_CACHE", root_.string());
  try {
    resolve_model_location("acme/absent", "");
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find((root_ / "models--acme--absent").string()), std::string::npos) << m;
    EXPECT_NE(m.find("foldserve pull acme/absent"), std::string::npos) << m;
  }
  add_snapshot(root_, kMainCommit, "main");
  try {
    resolve_model_location("acme/tiny", "v9");
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("v9"), std::string::npos) << m;
    EXPECT_NE(m.find("foldserve pull acme/tiny --revision v9"), std::string::npos) << m;
  }
}

TEST_F(HubCache, RevisionNeedsAHubName) {
  EXPECT_THROW(resolve_model_location(root_.string(), "main"), Error);
  EXPECT_THROW(resolve_model_location("", "main"), Error);
  EXPECT_EQ(resolve_model_location("no-such-folder", ""), stdfs::path("no-such-folder"));
}

TEST_F(HubCache, CheckpointLoadsThroughBlobSymlinks) {
  FS_REQUIRE_SHARED(shared);
  const stdfs::path source = shared / "models/tiny-qwen3";
  const stdfs::path repo = root_ / "models--acme--tiny";
  const stdfs::path snapshot = repo / "snapshots" / kMainCommit;
  stdfs::create_directories(repo / "blobs");
  stdfs::create_directories(snapshot);
  stdfs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << kMainCommit;
  int n = 0;
  for (const auto& entry : stdfs::directory_iterator(source)) {
    const std::string blob = "blob" + std::to_string(n++);
    stdfs::copy_file(entry.path(), repo / "blobs" / blob);
    stdfs::create_symlink(stdfs::path("../../blobs") / blob, snapshot / entry.path().filename());
  }
  ScopedEnv a("HF_HUB_CACHE", root_.string());
  stdfs::path dir = resolve_model_location("acme/tiny", "");
  ASSERT_TRUE(stdfs::is_symlink(dir / "model.safetensors"));
  auto linked = Checkpoint::open(dir);
  auto original = Checkpoint::open(source);
  ASSERT_EQ(linked->names(), original->names());
  for (const auto& name : original->names()) {
    TensorView a = linked->get(name), b = original->get(name);
    const size_t bytes = size_t(b.info->end - b.info->begin);
    ASSERT_EQ(a.info->end - a.info->begin, bytes) << name;
    EXPECT_EQ(std::memcmp(a.data, b.data, bytes), 0) << name;
  }
}

}  // namespace
}  // namespace fs

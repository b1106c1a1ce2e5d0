// `foldserve pull` as a user runs it, against a fake hub on 127.0.0.1 serving the tiny-qwen3 fixture: the cache
// layout it leaves, resume after a cut, verification, refusals, no network, a full disk, and models run from it.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <unistd.h>

#include "core/files.h"
#include "hub/fake_hub.h"
#include "support/fixtures.h"
#include "support/process.h"
#include "support/server_process.h"

namespace fs::test {
namespace {
namespace stdfs = std::filesystem;

const std::string kRepo = "acme/tiny-qwen3";
const std::vector<std::string> kLfsFiles = {"model.safetensors", "tokenizer.json"};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class HubPull : public ::testing::Test {
 protected:
  void SetUp() override {
    shared_ = shared_dir();
    if (shared_.empty()) {
      if (running_in_ci()) FAIL() << "shared fixtures missing in CI";
      GTEST_SKIP() << "shared fixtures not found (set FOLDSERVE_SHARED)";
    }
    source_ = shared_ / "models/tiny-qwen3";
    root_ = stdfs::temp_directory_path() / ("fs-hub-pull-" + std::to_string(::getpid()) + "-" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    stdfs::remove_all(root_);
    stdfs::create_directories(root_ / "home");
    std::map<std::string, FakeHubFile> files;
    for (const auto& entry : stdfs::directory_iterator(source_)) {
      const std::string name = entry.path().filename().string();
      files[name] = {read_file(entry.path()), std::count(kLfsFiles.begin(), kLfsFiles.end(), name) > 0};
    }
    commit_ = FakeHub::sha256_hex(kRepo + " at main").substr(0, 40);
    hub_ = std::make_unique<FakeHub>(kRepo, commit_, files);
    for (const char* extra : {"README.md", ".gitattributes", "pytorch_model.bin", "onnx/model.safetensors"})
      hub_->add_listed_only(extra);
  }
  void TearDown() override {
    hub_.reset();
    stdfs::remove_all(root_);
  }

  stdfs::path cache() const { return root_ / "cache"; }
  stdfs::path repo_dir() const { return cache() / "models--acme--tiny-qwen3"; }
  stdfs::path snapshot() const { return repo_dir() / "snapshots" / commit_; }
  stdfs::path blob_of(const std::string& file) const {
    return repo_dir() / "blobs" / FakeHub::sha256_hex(read_file(source_ / file));
  }

  // Runs foldserve with the cache, hub and token environment of this test.
  CommandResult foldserve(const std::string& args, const std::string& token = "",
                          const std::string& endpoint = "") const {
    std::string env = "env HF_HUB_CACHE=" + shell_quote(cache().string()) +
                      " HF_HOME=" + shell_quote((root_ / "home").string()) +
                      " HF_ENDPOINT=" + shell_quote(endpoint.empty() ? hub_->endpoint() : endpoint) +
                      " HF_TOKEN=" + shell_quote(token) + " NO_PROXY=127.0.0.1 no_proxy=127.0.0.1 ";
    return run_command(env + shell_quote(foldserve_binary()) + " " + args);
  }

  bool requested(const std::string& part) const {
    auto log = hub_->requests();
    return std::any_of(log.begin(), log.end(), [&](const std::string& r) { return contains(r, part); });
  }

  stdfs::path shared_, source_, root_;
  std::string commit_;
  std::unique_ptr<FakeHub> hub_;
};

TEST_F(HubPull, LeavesTheHubCacheLayoutWithOnlyTheServerFiles) {
  auto r = foldserve("pull " + kRepo);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, snapshot().string())) << r.out;
  EXPECT_TRUE(contains(r.out, "foldserve serve " + kRepo)) << r.out;
  EXPECT_EQ(read_file(repo_dir() / "refs" / "main"), commit_);
  for (const auto& entry : stdfs::directory_iterator(source_)) {
    stdfs::path linked = snapshot() / entry.path().filename();
    ASSERT_TRUE(stdfs::is_symlink(linked)) << linked;
    EXPECT_EQ(stdfs::read_symlink(linked).parent_path(), stdfs::path("../../blobs"));
    EXPECT_TRUE(read_file(linked) == read_file(entry.path())) << linked;
  }
  for (const auto& f : kLfsFiles) EXPECT_TRUE(stdfs::is_regular_file(blob_of(f))) << f;
  for (const char* skipped : {"README.md", ".gitattributes", "pytorch_model.bin", "onnx"}) {
    EXPECT_FALSE(requested(skipped)) << skipped;
    EXPECT_FALSE(stdfs::exists(snapshot() / skipped)) << skipped;
  }

  hub_->clear_requests();
  auto again = foldserve("pull " + kRepo);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(contains(again.err, "already in the cache")) << again.err;
  EXPECT_FALSE(requested("GET /cdn/"));
}

TEST_F(HubPull, PulledModelRunsAndTokenizesByName) {
  ASSERT_EQ(foldserve("pull " + kRepo).exit_code, 0);
  const std::string local = shell_quote(source_.string());
  const std::string gen = " --ids 1,2,3 --max-tokens 3 --temperature 0 --json --device cpu";
  auto by_name = foldserve("run " + kRepo + gen);
  auto by_folder = foldserve("run " + local + gen);
  ASSERT_EQ(by_name.exit_code, 0) << by_name.err;
  ASSERT_EQ(by_folder.exit_code, 0) << by_folder.err;
  EXPECT_EQ(by_name.out, by_folder.out);

  auto tok_name = foldserve("tokenize " + kRepo + " --revision main --text 'Hello, hub!'");
  auto tok_folder = foldserve("tokenize " + local + " --text 'Hello, hub!'");
  ASSERT_EQ(tok_name.exit_code, 0) << tok_name.err;
  EXPECT_EQ(tok_name.out, tok_folder.out);
  EXPECT_EQ(foldserve("detokenize " + kRepo + " --ids 1,2,3").out, foldserve("detokenize " + local + " --ids 1,2,3").out);
}

TEST_F(HubPull, PulledModelServesByNameUnderThatName) {
  ASSERT_EQ(foldserve("pull " + kRepo).exit_code, 0);
  ::setenv("HF_HUB_CACHE", cache().c_str(), 1);
  ServerProcess server({kRepo, "--prompt-cache-gib", "0", "--device", "cpu"});
  ::unsetenv("HF_HUB_CACHE");
  ASSERT_TRUE(server.ready()) << server.stderr_text();
  std::string reply = raw_exchange(server.port(), "GET /v1/models/" + kRepo + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(first_status(reply), 200) << reply;
  EXPECT_TRUE(contains(reply, "\"id\":\"" + kRepo + "\"")) << reply;
  EXPECT_TRUE(contains(server.stdout_text(), "\"model\":\"" + kRepo + "\"")) << server.stdout_text();
}

TEST_F(HubPull, ACutDownloadResumesWithRange) {
  hub_->cut_next_download("model.safetensors");
  auto cut = foldserve("pull " + kRepo);
  ASSERT_NE(cut.exit_code, 0);
  EXPECT_TRUE(contains(cut.err, "model.safetensors")) << cut.err;
  EXPECT_TRUE(contains(cut.err, "again to resume")) << cut.err;
  stdfs::path part = blob_of("model.safetensors").string() + ".incomplete";
  ASSERT_TRUE(stdfs::exists(part));
  const auto have = stdfs::file_size(part);
  EXPECT_GT(have, 0u);
  EXPECT_LT(have, stdfs::file_size(source_ / "model.safetensors"));

  auto resumed = foldserve("pull " + kRepo);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(requested("range=bytes=" + std::to_string(have) + "-"));
  EXPECT_FALSE(stdfs::exists(part));
  EXPECT_TRUE(read_file(snapshot() / "model.safetensors") == read_file(source_ / "model.safetensors"));
}

TEST_F(HubPull, ACorruptedDownloadIsRemovedAndNamed) {
  hub_->corrupt("tokenizer.json");
  auto bad = foldserve("pull " + kRepo);
  ASSERT_NE(bad.exit_code, 0);
  EXPECT_TRUE(contains(bad.err, "tokenizer.json")) << bad.err;
  EXPECT_TRUE(contains(bad.err, "sha256")) << bad.err;
  EXPECT_FALSE(stdfs::exists(blob_of("tokenizer.json")));
  EXPECT_FALSE(stdfs::exists(blob_of("tokenizer.json").string() + ".incomplete"));
  EXPECT_FALSE(stdfs::exists(snapshot() / "tokenizer.json"));

  hub_->corrupt("");
  auto good = foldserve("pull " + kRepo);
  ASSERT_EQ(good.exit_code, 0) << good.err;
  EXPECT_TRUE(read_file(snapshot() / "tokenizer.json") == read_file(source_ / "tokenizer.json"));
}

TEST_F(HubPull, RefusalsAreExplained) {
  auto missing = foldserve("pull acme/absent");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_TRUE(contains(missing.err, "acme/absent not found")) << missing.err;

  auto revision = foldserve("pull " + kRepo + " --revision nope");
  EXPECT_NE(revision.exit_code, 0);
  EXPECT_TRUE(contains(revision.err, "revision 'nope'")) << revision.err;

  hub_->refuse_with(401);
  auto unauthorized = foldserve("pull " + kRepo);
  EXPECT_NE(unauthorized.exit_code, 0);
  EXPECT_TRUE(contains(unauthorized.err, "401")) << unauthorized.err;
  EXPECT_TRUE(contains(unauthorized.err, "HF_TOKEN")) << unauthorized.err;

  hub_->refuse_with(403);
  auto gated = foldserve("pull " + kRepo, "some-token");
  EXPECT_NE(gated.exit_code, 0);
  EXPECT_TRUE(contains(gated.err, "gated")) << gated.err;
  EXPECT_TRUE(contains(gated.err, hub_->endpoint() + "/" + kRepo)) << gated.err;
  EXPECT_FALSE(stdfs::exists(snapshot()));
}

TEST_F(HubPull, TheTokenIsSentAsBearer) {
  hub_->require_token("hf_secret");
  auto without = foldserve("pull " + kRepo);
  EXPECT_NE(without.exit_code, 0);
  EXPECT_TRUE(contains(without.err, "HF_TOKEN")) << without.err;
  auto with = foldserve("pull " + kRepo, "hf_secret");
  EXPECT_EQ(with.exit_code, 0) << with.err;
  EXPECT_FALSE(contains(with.err + with.out, "hf_secret"));
}

TEST_F(HubPull, NoNetworkIsNamed) {
  auto r = foldserve("pull " + kRepo, "", "http://127.0.0.1:" + std::to_string(free_loopback_port()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "cannot reach")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(HubPull, AFullDiskIsNamed) {
  // The weights' partial file is /dev/full, so every write to it fails with ENOSPC.
  stdfs::path part = blob_of("model.safetensors").string() + ".incomplete";
  stdfs::create_directories(part.parent_path());
  stdfs::create_symlink("/dev/full", part);
  auto r = foldserve("pull " + kRepo);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "disk full")) << r.err;
  EXPECT_TRUE(contains(r.err, "model.safetensors")) << r.err;
}

TEST_F(HubPull, ACommitRevisionNeedsNoRef) {
  auto r = foldserve("pull " + kRepo + " --revision " + commit_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "--revision " + commit_)) << r.out;
  EXPECT_FALSE(stdfs::exists(repo_dir() / "refs" / "main"));
  auto by_commit = foldserve("tokenize " + kRepo + " --revision " + commit_ + " --text hi");
  EXPECT_EQ(by_commit.exit_code, 0) << by_commit.err;
  auto by_main = foldserve("tokenize " + kRepo + " --text hi");
  EXPECT_NE(by_main.exit_code, 0);
  EXPECT_TRUE(contains(by_main.err, "foldserve pull " + kRepo)) << by_main.err;
}

}  // namespace
}  // namespace fs::test

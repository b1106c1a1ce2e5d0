// Loading the NCCL table and reporting NCCL errors.
#include "backends/cuda/host/nccl_table.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.h"
#include "fake_nccl.h"

namespace fs::cuda {
namespace {

std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

TEST(NcclTable, MissingLibraryIsAClearError) {
  std::string message = message_of([] { load_nccl_table("libfoldserve-no-such-nccl.so.2"); });
  EXPECT_NE(message.find("NCCL library libfoldserve-no-such-nccl.so.2 could not be loaded"), std::string::npos)
      << message;
  EXPECT_NE(message.find("tensor parallelism needs NCCL 2"), std::string::npos) << message;
}

TEST(NcclTable, LibraryWithoutTheCallsNamesTheMissingSymbol) {
  std::string message = message_of([] { load_nccl_table("libm.so.6"); });
  EXPECT_NE(message.find("libm.so.6 lacks ncclGetVersion"), std::string::npos) << message;
}

TEST(NcclTable, InstalledLibraryResolvesEveryCallAndReportsItsVersion) {
  NcclTable table;
  try {
    table = load_nccl_table();
  } catch (const Error& e) {
    GTEST_SKIP() << "no NCCL here: " << e.what();
  }
  int version = 0;
  ASSERT_EQ(table.get_version(&version), ncclSuccess);
  EXPECT_EQ(version / 10000, 2) << version;
  EXPECT_NE(std::string(table.get_error_string(ncclRemoteError)), "");
}

TEST(NcclTable, VersionTextSplitsTheCode) {
  EXPECT_EQ(nccl_version_text(22707), "2.27.7");
  EXPECT_EQ(nccl_version_text(21903), "2.19.3");
}

TEST(NcclTable, FailureNamesTheCallTheSubjectAndNcclsText) {
  test::FakeNccl fake;
  std::string message = message_of([] { check_nccl(ncclRemoteError, nccl_symbol::all_gather, "rank 1 of 2"); });
  EXPECT_EQ(message,
            "ncclAllGather failed for rank 1 of 2: remote process "
            "exited or there was a network error (6)");
  EXPECT_EQ(message_of([] { check_nccl(ncclSuccess, nccl_symbol::all_gather); }), "");
}

TEST(NcclTable, ScopedTableIsCurrentOnlyWhileAlive) {
  NcclTable first, second;
  first.get_version = [](int* v) { return *v = 1, ncclSuccess; };
  second.get_version = [](int* v) { return *v = 2, ncclSuccess; };
  int version = 0;
  {
    ScopedNcclTable outer(first);
    {
      ScopedNcclTable inner(second);
      nccl().get_version(&version);
      EXPECT_EQ(version, 2);
    }
    nccl().get_version(&version);
    EXPECT_EQ(version, 1);
  }
}

}  // namespace
}  // namespace fs::cuda

// Loading the NCCL table and reporting NCCL errors.
#include "backends/cuda/host/nccl_table.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "error_message.h"
#include "fake_nccl.h"

namespace fs::cuda {
namespace {

using test::message_of;

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

TEST(NcclTable, DescriptionNamesTheVersionOrWhyThereIsNone) {
  test::FakeNccl fake;
  EXPECT_EQ(nccl_description(), "2.27.7");
  NcclTable missing;
  missing.get_version = [](int*) { return ncclSystemError; };
  missing.get_error_string = [](ncclResult_t) { return "unhandled system error"; };
  ScopedNcclTable installed(missing);
  EXPECT_EQ(nccl_description(), "not available (ncclGetVersion failed: unhandled system error (2))");
}

TEST(FakeNccl, RanksJoinedByUniqueIdGatherTogether) {
  test::FakeNccl fake;
  ncclUniqueId id;
  ASSERT_EQ(nccl().get_unique_id(&id), ncclSuccess);
  std::vector<ncclComm_t> comms(2);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(nccl().comm_init_rank(&comms[size_t(r)], 2, id, r), ncclSuccess);
  std::vector<std::vector<float>> out(2, std::vector<float>(4));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      const float mine[2] = {float(r), float(10 + r)};
      EXPECT_EQ(nccl().all_gather(mine, out[size_t(r)].data(), 2, ncclFloat32, comms[size_t(r)], nullptr), ncclSuccess);
    });
  for (auto& t : threads) t.join();
  for (const auto& o : out) EXPECT_EQ(o, (std::vector<float>{0, 10, 1, 11}));
  for (ncclComm_t c : comms) EXPECT_EQ(nccl().comm_destroy(c), ncclSuccess);
  ncclComm_t stranger;
  ncclUniqueId unknown{};
  EXPECT_EQ(nccl().comm_init_rank(&stranger, 2, unknown, 0), ncclInvalidArgument);
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

// Loading the driver table and reporting driver errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "backends/cuda/host/check.h"
#include "backends/cuda/host/device.h"
#include "backends/cuda/host/driver_table.h"
#include "core/error.h"
#include "error_message.h"
#include "fake_driver.h"

namespace fs::cuda {
namespace {

using test::FakeDriver;
using test::message_of;

TEST(DriverTable, MissingLibraryIsAClearError) {
  std::string message = message_of([] { load_driver_table("libfoldserve-no-such-driver.so.1"); });
  EXPECT_NE(message.find("CUDA driver library libfoldserve-no-such-driver.so.1 could not be loaded"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("needs an NVIDIA driver"), std::string::npos) << message;
}

TEST(DriverTable, LibraryWithoutTheDriverCallsNamesTheMissingSymbol) {
  std::string message = message_of([] { load_driver_table("libm.so.6"); });
  EXPECT_NE(message.find("libm.so.6 lacks cuInit"), std::string::npos) << message;
}

TEST(DriverTable, StubDriverResolvesEveryCallAndRefusesToStart) {
  // The toolkit's link stub exports every driver symbol but cannot run anything.
  const std::filesystem::path stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  DriverTable table = load_driver_table(stub.string());
#define FS_EXPECT_RESOLVED(member, symbol, ret, params) EXPECT_NE(table.member, nullptr) << symbol;
  FS_CUDA_DRIVER_CALLS(FS_EXPECT_RESOLVED)
#undef FS_EXPECT_RESOLVED
  ScopedDriverTable installed(table);
  std::string message = message_of([] { Device device(0); });
  EXPECT_NE(message.find("cuInit failed"), std::string::npos) << message;
}

TEST(DriverTable, ScopedTableIsCurrentThenRestored) {
  DriverTable outer_table;
  outer_table.init = [](unsigned) { return CUDA_ERROR_NO_DEVICE; };
  ScopedDriverTable outer(outer_table);
  EXPECT_EQ(&driver(), &outer_table);
  {
    FakeDriver fake;
    EXPECT_EQ(&driver(), &fake.table());
    EXPECT_EQ(driver().init(0), CUDA_SUCCESS);
  }
  EXPECT_EQ(&driver(), &outer_table);
  EXPECT_EQ(driver().init(0), CUDA_ERROR_NO_DEVICE);
}

TEST(DriverTable, SymbolNamesMatchTheDriverAbi) {
  EXPECT_STREQ(driver_symbol::mem_alloc, "cuMemAlloc_v2");
  EXPECT_STREQ(driver_symbol::device_total_mem, "cuDeviceTotalMem_v2");
  EXPECT_STREQ(driver_symbol::memcpy_htod_async, "cuMemcpyHtoDAsync_v2");
  EXPECT_STREQ(driver_symbol::stream_destroy, "cuStreamDestroy_v2");
  EXPECT_STREQ(driver_symbol::event_destroy, "cuEventDestroy_v2");
  EXPECT_STREQ(driver_symbol::primary_ctx_release, "cuDevicePrimaryCtxRelease_v2");
  EXPECT_STREQ(driver_symbol::stream_begin_capture, "cuStreamBeginCapture_v2");
}

TEST(CheckedCall, ErrorNamesTheCallAndTheDriversText) {
  FakeDriver fake;
  std::string message = message_of([] { check(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc_v2", "kv pages"); });
  EXPECT_EQ(message, "cuMemAlloc_v2 failed for kv pages: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory");
  message = message_of([] { check(12345, "cuLaunchKernel"); });
  EXPECT_EQ(message, "cuLaunchKernel failed: CUDA error (12345): unrecognized error code");
  EXPECT_NO_THROW(check(CUDA_SUCCESS, "cuInit"));
}

TEST(CheckedCall, MacroReportsTheExportedSymbol) {
  FakeDriver fake;
  fake.fail_call("cuStreamSynchronize", 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  std::string message = message_of([] { FS_CU(stream_synchronize, nullptr); });
  EXPECT_EQ(message,
            "cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was "
            "encountered");
}

}  // namespace
}  // namespace fs::cuda

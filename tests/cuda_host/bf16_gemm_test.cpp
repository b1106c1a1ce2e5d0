// bf16 GEMM plans on the fake cuBLASLt: descriptor bookkeeping, the row-major mapping, and clean failures.
#include <gtest/gtest.h>

#include <cstring>

#include "backends/cuda/host/bf16_gemm.h"
#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/stream.h"
#include "core/error.h"
#include "fake_blaslt.h"
#include "fake_driver.h"

namespace fs::cuda {
namespace {

using test::FakeBlasLt;
using test::FakeDriver;

// Small integers (exact in bf16) so sums of products are exact too.
std::vector<std::uint16_t> small_ints(std::size_t count, int seed) {
  std::vector<std::uint16_t> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = test::to_bf16(static_cast<float>(int((i * 7 + seed) % 9) - 4));
  return values;
}

TEST(Bf16Gemm, PlanCreatesAndDestroysEveryDescriptor) {
  FakeBlasLt fake;
  {
    BlasLtHandle handle;
    {
      Bf16GemmPlan plan(handle, 8, 16, 32, 1 << 20);
      EXPECT_EQ(plan.workspace_bytes(), 1024u);
      // handle + matmul descriptor + three layouts; the search preference is gone once the algorithm is chosen.
      EXPECT_EQ(fake.live_objects(), 5u);
      EXPECT_EQ(fake.count("cublasLtMatmulPreferenceDestroy"), 1u);
    }
    EXPECT_EQ(fake.live_objects(), 1u);
  }
  EXPECT_EQ(fake.live_objects(), 0u);
}

TEST(Bf16Gemm, ComputesRowMajorXTimesWTransposed) {
  FakeDriver driver_fake;
  FakeBlasLt fake;
  constexpr std::uint64_t m = 3, n = 4, k = 5;
  auto x = small_ints(m * k, 1);
  auto w = small_ints(n * k, 2);
  DeviceArena arena(1 << 16, "gemm arena");
  Stream stream;
  DeviceSpan dx = arena.allocate(x.size() * 2, "x"), dw = arena.allocate(w.size() * 2, "w");
  DeviceSpan dy = arena.allocate(m * n * 2, "y"), ws = arena.allocate(1024, "workspace");
  std::memcpy(reinterpret_cast<void*>(dx.ptr), x.data(), dx.bytes);
  std::memcpy(reinterpret_cast<void*>(dw.ptr), w.data(), dw.bytes);
  BlasLtHandle handle;
  Bf16GemmPlan plan(handle, m, n, k, 1 << 20);
  plan.run(dx.ptr, dw.ptr, dy.ptr, ws.ptr, stream.handle());
  std::vector<std::uint16_t> y(m * n);
  std::memcpy(y.data(), reinterpret_cast<const void*>(dy.ptr), dy.bytes);
  for (std::uint64_t i = 0; i < m; ++i) {
    for (std::uint64_t j = 0; j < n; ++j) {
      float expected = 0;
      for (std::uint64_t p = 0; p < k; ++p) expected += test::from_bf16(x[i * k + p]) * test::from_bf16(w[j * k + p]);
      EXPECT_EQ(test::from_bf16(y[i * n + j]), expected) << "y[" << i << "," << j << "]";
    }
  }
}

TEST(Bf16Gemm, FailureWhileBuildingThePlanLeaksNothing) {
  FakeBlasLt fake;
  BlasLtHandle handle;
  for (const char* call : {"cublasLtMatmulDescCreate", "cublasLtMatmulDescSetAttribute", "cublasLtMatrixLayoutCreate",
                           "cublasLtMatmulPreferenceCreate", "cublasLtMatmulAlgoGetHeuristic"}) {
    SCOPED_TRACE(call);
    fake.fail_call(call, call == std::string("cublasLtMatrixLayoutCreate") ? 3 : 1, CUBLAS_STATUS_NOT_SUPPORTED);
    try {
      Bf16GemmPlan plan(handle, 8, 8, 8, 0);
      FAIL() << "plan built despite the failure";
    } catch (const Error& e) {
      std::string message = e.what();
      EXPECT_NE(message.find(std::string(call) + " failed"), std::string::npos) << message;
      EXPECT_NE(message.find("CUBLAS_STATUS_NOT_SUPPORTED (15)"), std::string::npos) << message;
    }
    EXPECT_EQ(fake.live_objects(), 1u);
  }
}

TEST(Bf16Gemm, ShapeWithoutAnAlgorithmIsAClearError) {
  FakeBlasLt fake;
  fake.set_algorithms_found(0);
  BlasLtHandle handle;
  try {
    Bf16GemmPlan plan(handle, 3, 5, 7, 4096);
    FAIL() << "plan built without an algorithm";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 GEMM m=3 n=5 k=7: cuBLASLt has no algorithm"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(fake.live_objects(), 1u);
  EXPECT_THROW(Bf16GemmPlan(handle, 0, 5, 7, 4096), Error);
}

TEST(Bf16Gemm, FailedRunNamesTheShape) {
  FakeBlasLt fake;
  BlasLtHandle handle;
  Bf16GemmPlan plan(handle, 2, 2, 2, 4096);
  fake.fail_call("cublasLtMatmul", 1);
  try {
    plan.run(0, 0, 0, 0, nullptr);
    FAIL() << "failed run not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cublasLtMatmul failed for bf16 GEMM m=2 n=2 k=2"), std::string::npos)
        << e.what();
  }
}

TEST(Bf16Gemm, MissingLibraryIsAClearError) {
  try {
    load_blaslt_table("libfoldserve-no-such-cublasLt.so.13");
    FAIL() << "missing library loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuBLASLt library libfoldserve-no-such-cublasLt.so.13 could not be loaded"),
              std::string::npos)
        << e.what();
  }
  const char* toolkit = "/usr/local/cuda/lib64/libcublasLt.so.13";
  if (FILE* probe = std::fopen(toolkit, "rb")) {
    std::fclose(probe);
    BlasLtTable table = load_blaslt_table(toolkit);
#define FS_EXPECT_RESOLVED(member, symbol, ret, params) EXPECT_NE(table.member, nullptr) << symbol;
    FS_CUDA_BLASLT_CALLS(FS_EXPECT_RESOLVED)
#undef FS_EXPECT_RESOLVED
  }
}

}  // namespace
}  // namespace fs::cuda

// The same host logic on the real driver when a GPU is present (skipped where libcuda.so.1 cannot be loaded).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "backends/cuda/host/bf16_gemm.h"
#include "backends/cuda/host/check.h"
#include "backends/cuda/host/device.h"
#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/downloader.h"
#include "backends/cuda/host/driver_table.h"
#include "backends/cuda/host/graph.h"
#include "backends/cuda/host/pinned_stage.h"
#include "backends/cuda/host/stream.h"
#include "core/error.h"

namespace fs::cuda {
namespace {

// The real driver table, or why this machine cannot run it (no libcuda, no device).
std::optional<DriverTable> real_driver(std::string& reason) {
  try {
    DriverTable table = load_driver_table();
    int count = 0;
    CUresult result = table.init(0);
    if (result == CUDA_SUCCESS) result = table.device_get_count(&count);
    if (result != CUDA_SUCCESS || count == 0) {
      reason = "the CUDA driver reports no usable device (CUresult " + std::to_string(result) + ")";
      return {};
    }
    return table;
  } catch (const Error& e) {
    reason = e.what();
    return {};
  }
}

#define FS_REQUIRE_GPU(table)                           \
  std::string skip_reason;                              \
  auto table = real_driver(skip_reason);                \
  if (!table) GTEST_SKIP() << skip_reason;              \
  ScopedDriverTable installed_##table(*table)

std::vector<unsigned char> pattern(std::size_t bytes, unsigned seed) {
  std::vector<unsigned char> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>((i * 29 + seed * 11 + 5) & 0xFF);
  return data;
}

TEST(RealDriver, OpensTheDeviceAndReadsItsAttributes) {
  FS_REQUIRE_GPU(table);
  Device device(0);
  EXPECT_FALSE(device.info().name.empty());
  EXPECT_GT(device.info().sm_count, 0);
  EXPECT_GT(device.info().total_bytes, std::size_t{0});
  EXPECT_GE(device.info().compute_major, 5);
  EXPECT_LE(device.free_bytes(), device.info().total_bytes);
}

TEST(RealDriver, StagedUploadsAndDownloadsRoundTrip) {
  FS_REQUIRE_GPU(table);
  Device device(0);
  PinnedBudget budget(std::size_t{64} << 20);
  DeviceArena arena(std::size_t{64} << 20, "round-trip arena");
  Stream stream;
  PinnedStage stage(budget, std::size_t{1} << 20);
  Downloader downloader(device, budget, std::size_t{1} << 20);
  // Several uploads through one stage, one larger than the stage, then everything read back.
  std::vector<std::vector<unsigned char>> inputs;
  std::vector<DeviceSpan> spans;
  for (unsigned i = 0; i < 6; ++i) {
    std::size_t bytes = i == 5 ? (std::size_t{5} << 20) + 123 : 1000 + i * 4096;
    inputs.push_back(pattern(bytes, i));
    spans.push_back(arena.allocate(bytes, "buffer " + std::to_string(i)));
    stage.upload(spans.back().ptr, inputs.back().data(), bytes, stream.handle());
  }
  EXPECT_EQ(budget.allocations(), 1u);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::vector<unsigned char> out(inputs[i].size(), 0);
    downloader.download(out.data(), spans[i].ptr, out.size(), stream.handle());
    EXPECT_EQ(out, inputs[i]) << "buffer " << i;
  }
  EXPECT_EQ(budget.allocations(), device.integrated() ? 2u : 1u);
}

TEST(RealDriver, CapturedGraphReplaysItsWork) {
  FS_REQUIRE_GPU(table);
  Device device(0);
  PinnedBudget budget(std::size_t{1} << 20);
  DeviceArena arena(std::size_t{1} << 20, "graph arena");
  Stream stream;
  Downloader downloader(device, budget);
  DeviceSpan a = arena.allocate(4096, "a");
  DeviceSpan b = arena.allocate(4096, "b");
  FS_CU(memset_d8_async, b.ptr, 0, 4096, stream.handle());
  stream.synchronize();
  CapturedGraph graph(stream.handle(), [&] {
    ASSERT_EQ(driver().memset_d8_async(a.ptr, 0x3C, 4096, stream.handle()), CUDA_SUCCESS);
    ASSERT_EQ(driver().memcpy_dtod_async(b.ptr, a.ptr, 4096, stream.handle()), CUDA_SUCCESS);
  });
  std::vector<unsigned char> out(4096, 0);
  downloader.download(out.data(), b.ptr, out.size(), stream.handle());
  EXPECT_EQ(out, std::vector<unsigned char>(4096, 0)) << "captured work ran at capture time";
  graph.launch(stream.handle());
  downloader.download(out.data(), b.ptr, out.size(), stream.handle());
  EXPECT_EQ(out, std::vector<unsigned char>(4096, 0x3C));
}

TEST(RealDriver, OverBudgetArenaAndBadCopyAreClearErrors) {
  FS_REQUIRE_GPU(table);
  Device device(0);
  EXPECT_THROW(DeviceArena(device.info().total_bytes * 2, "huge arena"), Error);
  Stream stream;
  std::vector<unsigned char> out(16);
  try {
    FS_CU(memcpy_dtoh_async, out.data(), CUdeviceptr{16}, out.size(), stream.handle());
    stream.synchronize();
    FAIL() << "copy from a bogus device address succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuMemcpyDtoHAsync_v2 failed"), std::string::npos) << e.what();
  }
}

// bf16 bits of small integers, exact in bf16 and in fp32 sums of up to 16 products.
std::vector<std::uint16_t> small_ints(std::size_t count, int seed) {
  std::vector<std::uint16_t> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    float value = static_cast<float>(int((i * 7 + seed) % 9) - 4);
    std::uint32_t bits;
    std::memcpy(&bits, &value, 4);
    values[i] = static_cast<std::uint16_t>(bits >> 16);
  }
  return values;
}

TEST(RealDriver, Bf16GemmMatchesTheRowMajorReference) {
  FS_REQUIRE_GPU(table);
  BlasLtTable blas;
  try {
    blas = load_blaslt_table();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  ScopedBlasLtTable installed_blas(blas);
  Device device(0);
  constexpr std::uint64_t m = 5, n = 24, k = 16;
  auto x = small_ints(m * k, 1), w = small_ints(n * k, 2);
  PinnedBudget budget(std::size_t{8} << 20);
  DeviceArena arena(std::size_t{64} << 20, "gemm arena");
  Stream stream;
  PinnedStage stage(budget, 4096);
  Downloader downloader(device, budget);
  DeviceSpan dx = arena.allocate(x.size() * 2, "x"), dw = arena.allocate(w.size() * 2, "w");
  DeviceSpan dy = arena.allocate(m * n * 2, "y");
  stage.upload(dx.ptr, x.data(), dx.bytes, stream.handle());
  stage.upload(dw.ptr, w.data(), dw.bytes, stream.handle());
  BlasLtHandle handle;
  Bf16GemmPlan plan(handle, m, n, k, std::size_t{32} << 20);
  DeviceSpan ws = arena.allocate(std::max<std::size_t>(plan.workspace_bytes(), 256), "workspace");
  plan.run(dx.ptr, dw.ptr, dy.ptr, ws.ptr, stream.handle());
  std::vector<std::uint16_t> y(m * n);
  downloader.download(y.data(), dy.ptr, dy.bytes, stream.handle());
  auto as_float = [](std::uint16_t bits) {
    std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &wide, 4);
    return value;
  };
  for (std::uint64_t i = 0; i < m; ++i) {
    for (std::uint64_t j = 0; j < n; ++j) {
      float expected = 0;
      for (std::uint64_t p = 0; p < k; ++p) expected += as_float(x[i * k + p]) * as_float(w[j * k + p]);
      EXPECT_EQ(as_float(y[i * n + j]), expected) << "y[" << i << "," << j << "]";
    }
  }
}

}  // namespace
}  // namespace fs::cuda

// Modules, launches and captured graphs on the fake driver: work lands where it should and nothing leaks.
#include <gtest/gtest.h>

#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/graph.h"
#include "backends/cuda/host/module.h"
#include "backends/cuda/host/stream.h"
#include "core/error.h"
#include "fake_driver.h"

namespace fs::cuda {
namespace {

using test::FakeDriver;

TEST(Module, LoadsFindsAndLaunchesKernels) {
  FakeDriver fake;
  {
    Module module("rms_norm swiglu", "ops");
    Stream stream;
    CUfunction fn = module.function("rms_norm");
    launch(fn, {4, 1, 1, 128, 1, 1, 0}, stream.handle(), nullptr, "rms_norm");
    EXPECT_EQ(fake.kernel_runs("rms_norm"), 0u);
    stream.synchronize();
    EXPECT_EQ(fake.kernel_runs("rms_norm"), 1u);
    try {
      module.function("missing_kernel");
      FAIL() << "missing kernel found";
    } catch (const Error& e) {
      std::string message = e.what();
      EXPECT_NE(message.find("cuModuleGetFunction failed for kernel missing_kernel in module ops"),
                std::string::npos)
          << message;
    }
  }
  EXPECT_EQ(fake.live_modules(), 0u);
  EXPECT_EQ(fake.live_streams(), 0u);
}

TEST(Module, FailedLaunchNamesTheKernel) {
  FakeDriver fake;
  Module module("decode_attention", "attention");
  Stream stream;
  fake.fail_call("cuLaunchKernel", 1, CUDA_ERROR_LAUNCH_FAILED);
  try {
    launch(module.function("decode_attention"), {}, stream.handle(), nullptr, "decode_attention");
    FAIL() << "failed launch not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuLaunchKernel failed for kernel decode_attention"), std::string::npos)
        << e.what();
  }
}

// The path CUDA translation units take: opaque handles, attributes and launches through the table.
TEST(Module, OpaqueLaunchAndAttributesGoThroughTheTable) {
  FakeDriver fake;
  Module module("gemm", "ops");
  Stream stream;
  void* fn = module.function("gemm");
  set_function_attribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 98304, "gemm");
  launch_opaque(fn, {8, 2, 1, 256, 1, 1, 98304}, stream.handle(), nullptr, "gemm");
  stream.synchronize();
  EXPECT_EQ(fake.kernel_runs("gemm"), 1u);
  fake.fail_call("cuFuncSetAttribute", 1, CUDA_ERROR_INVALID_VALUE);
  try {
    set_function_attribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1 << 30, "gemm");
    FAIL() << "refused attribute not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuFuncSetAttribute failed for kernel gemm"), std::string::npos) << e.what();
  }
  fake.fail_call("cuLaunchKernel", 1, CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_THROW(launch_opaque(fn, {}, stream.handle(), nullptr, "gemm"), Error);
  stream.synchronize();
  EXPECT_EQ(fake.kernel_runs("gemm"), 1u);
}

// An overlapping launch goes through cuLaunchKernelEx with one attribute (programmatic stream serialization) and
// the same shape; a plain one stays on cuLaunchKernel.
TEST(Module, OverlappingLaunchCarriesTheProgrammaticSerializationAttribute) {
  FakeDriver fake;
  Module module("gemm", "ops");
  Stream stream;
  void* fn = module.function("gemm");
  fake.clear_calls();
  LaunchShape shape{8, 2, 1, 256, 1, 1, 4096};
  shape.overlaps_previous = true;
  launch_opaque(fn, shape, stream.handle(), nullptr, "gemm");
  launch_opaque(fn, {8, 2, 1, 256, 1, 1, 4096}, stream.handle(), nullptr, "gemm");
  stream.synchronize();
  EXPECT_EQ(fake.kernel_runs("gemm"), 2u);
  EXPECT_EQ(fake.count("cuLaunchKernelEx"), 1u);
  EXPECT_EQ(fake.count("cuLaunchKernel"), 1u);
  for (const auto& call : fake.calls()) {
    if (call.name == "cuLaunchKernelEx") {
      EXPECT_EQ(call.args, (std::vector<std::uint64_t>{reinterpret_cast<std::uintptr_t>(fn), 8, 2, 1, 256, 1, 1, 4096,
                                                       reinterpret_cast<std::uintptr_t>(stream.handle()), 1}));
    }
  }
  fake.fail_call("cuLaunchKernelEx", 1, CUDA_ERROR_LAUNCH_FAILED);
  try {
    launch_opaque(fn, shape, stream.handle(), nullptr, "gemm");
    FAIL() << "failed overlapping launch not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuLaunchKernelEx failed for kernel gemm"), std::string::npos) << e.what();
  }
}

TEST(CapturedGraph, CapturesOnceAndReplaysOnEveryLaunch) {
  FakeDriver fake;
  Module module("decode_step", "decode");
  CUfunction fn = module.function("decode_step");
  DeviceArena arena(1 << 12, "arena");
  DeviceSpan flag = arena.allocate(16, "flag");
  Stream stream;
  {
    CapturedGraph graph(stream.handle(), [&] {
      launch(fn, {}, stream.handle(), nullptr, "decode_step");
      ASSERT_EQ(driver().memset_d8_async(flag.ptr, 0x5A, 16, stream.handle()), CUDA_SUCCESS);
    });
    stream.synchronize();
    EXPECT_EQ(fake.kernel_runs("decode_step"), 0u) << "captured work must not run at capture";
    for (int i = 0; i < 3; ++i) graph.launch(stream.handle());
    stream.synchronize();
    EXPECT_EQ(fake.kernel_runs("decode_step"), 3u);
    EXPECT_EQ(fake.peek(flag.ptr, 16), std::vector<unsigned char>(16, 0x5A));
    EXPECT_EQ(fake.live_graphs(), 1u);
    EXPECT_EQ(fake.live_graph_execs(), 1u);
  }
  EXPECT_EQ(fake.live_graphs(), 0u);
  EXPECT_EQ(fake.live_graph_execs(), 0u);
}

TEST(CapturedGraph, FailureDuringCaptureEndsCaptureAndLeaksNothing) {
  FakeDriver fake;
  Stream stream;
  EXPECT_THROW(CapturedGraph(stream.handle(), [] { throw Error("kernel setup failed"); }), Error);
  EXPECT_EQ(fake.count("cuStreamEndCapture"), 1u);
  EXPECT_EQ(fake.live_graphs(), 0u);
  fake.fail_call("cuGraphInstantiateWithFlags", 1, CUDA_ERROR_INVALID_VALUE);
  EXPECT_THROW(CapturedGraph(stream.handle(), [] {}), Error);
  EXPECT_EQ(fake.live_graphs(), 0u);
  EXPECT_EQ(fake.live_graph_execs(), 0u);
  // The stream is out of capture mode and usable again.
  CapturedGraph graph(stream.handle(), [] {});
  graph.launch(stream.handle());
  stream.synchronize();
}

}  // namespace
}  // namespace fs::cuda

// Device opening on the fake driver: attributes read once, context retained and released, clear errors.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/cuda/host/device.h"
#include "core/error.h"
#include "fake_driver.h"

namespace fs::cuda {
namespace {

using test::FakeDriver;

TEST(Device, ReadsItsAttributesOnceAndCachesThem) {
  FakeDriver fake;
  fake.set_integrated(true);
  fake.set_total_memory(std::size_t{3} << 30);
  Device device(0);
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(device.integrated());
    EXPECT_EQ(device.info().sm_count, 132);
  }
  EXPECT_EQ(device.info().name, "Fake CUDA Device");
  EXPECT_EQ(device.info().total_bytes, std::size_t{3} << 30);
  EXPECT_EQ(device.info().compute_major, 9);
  EXPECT_EQ(device.info().compute_minor, 0);
  EXPECT_EQ(fake.attribute_reads(CU_DEVICE_ATTRIBUTE_INTEGRATED), 1u);
  EXPECT_EQ(fake.attribute_reads(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), 1u);
  EXPECT_EQ(fake.count("cuDeviceTotalMem_v2"), 1u);
}

TEST(Device, ReportsDiscreteCards) {
  FakeDriver fake;
  fake.set_integrated(false);
  Device device(0);
  EXPECT_FALSE(device.integrated());
}

TEST(Device, RetainsThePrimaryContextMakesItCurrentAndReleasesIt) {
  FakeDriver fake;
  {
    Device device(0);
    EXPECT_EQ(fake.context_references(), 1);
    auto names = fake.call_names();
    auto retain = std::find(names.begin(), names.end(), "cuDevicePrimaryCtxRetain");
    auto current = std::find(names.begin(), names.end(), "cuCtxSetCurrent");
    ASSERT_NE(retain, names.end());
    ASSERT_NE(current, names.end());
    EXPECT_LT(retain, current);
  }
  EXPECT_EQ(fake.context_references(), 0);
  EXPECT_EQ(fake.count("cuDevicePrimaryCtxRelease_v2"), 1u);
}

TEST(Device, MissingOrdinalIsAClearError) {
  FakeDriver fake;
  fake.set_device_count(2);
  try {
    Device device(5);
    FAIL() << "device 5 opened";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("CUDA device 5 does not exist"), std::string::npos) << message;
    EXPECT_NE(message.find("2 devices"), std::string::npos) << message;
  }
  fake.set_device_count(0);
  EXPECT_THROW(Device(0), Error);
  EXPECT_EQ(fake.context_references(), 0);
}

TEST(Device, FailedAttributeReadNamesTheCallAndTheAttribute) {
  FakeDriver fake;
  fake.fail_call("cuDeviceGetAttribute", 1, CUDA_ERROR_INVALID_DEVICE);
  try {
    Device device(0);
    FAIL() << "device opened despite the failed attribute read";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("cuDeviceGetAttribute failed for device attribute integrated"), std::string::npos)
        << message;
    EXPECT_NE(message.find("CUDA_ERROR_INVALID_DEVICE (101): invalid device ordinal"), std::string::npos)
        << message;
  }
  EXPECT_EQ(fake.context_references(), 0);
}

TEST(Device, FailedMakeCurrentReleasesTheContext) {
  FakeDriver fake;
  fake.fail_call("cuCtxSetCurrent", 1, CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_THROW(Device(0), Error);
  EXPECT_EQ(fake.context_references(), 0);
}

TEST(Device, FreeBytesFollowsAllocations) {
  FakeDriver fake;
  fake.set_total_memory(1 << 20);
  Device device(0);
  EXPECT_EQ(device.free_bytes(), std::size_t{1} << 20);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(driver().mem_alloc(&ptr, 4096), CUDA_SUCCESS);
  EXPECT_EQ(device.free_bytes(), (std::size_t{1} << 20) - 4096);
  ASSERT_EQ(driver().mem_free(ptr), CUDA_SUCCESS);
}

}  // namespace
}  // namespace fs::cuda

// The driver types foldserve declares itself (backends/cuda/host/driver_types.h) lay out as cuda.h's do.
#include <gtest/gtest.h>

#include <cstddef>

// Ours first: cuda.h defines some of the same names as macros.
#include "backends/cuda/host/driver_types.h"
// clang-format off
#include <cuda.h>
// clang-format on

namespace {

namespace ours = fs::cuda;

static_assert(sizeof(ours::CUlaunchAttributeValue) == sizeof(::CUlaunchAttributeValue));
static_assert(alignof(ours::CUlaunchAttributeValue) == alignof(::CUlaunchAttributeValue));
static_assert(sizeof(ours::CUlaunchAttribute) == sizeof(::CUlaunchAttribute));
static_assert(offsetof(ours::CUlaunchAttribute, value) == offsetof(::CUlaunchAttribute, value));
static_assert(sizeof(ours::CUlaunchConfig) == sizeof(::CUlaunchConfig));
static_assert(offsetof(ours::CUlaunchConfig, sharedMemBytes) == offsetof(::CUlaunchConfig, sharedMemBytes));
static_assert(offsetof(ours::CUlaunchConfig, hStream) == offsetof(::CUlaunchConfig, hStream));
static_assert(offsetof(ours::CUlaunchConfig, attrs) == offsetof(::CUlaunchConfig, attrs));
static_assert(offsetof(ours::CUlaunchConfig, numAttrs) == offsetof(::CUlaunchConfig, numAttrs));
static_assert(ours::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION ==
              int(::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION));
static_assert(sizeof(ours::CUtensorMap) == sizeof(::CUtensorMap));

TEST(DriverAbi, LaunchConfigFieldsSitWhereTheDriverReadsThem) {
  ours::CUlaunchAttribute a{};
  a.id = ours::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  a.value.programmaticStreamSerializationAllowed = 1;
  const auto* theirs = reinterpret_cast<const ::CUlaunchAttribute*>(&a);
  EXPECT_EQ(theirs->id, ::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  EXPECT_EQ(theirs->value.programmaticStreamSerializationAllowed, 1);
}

}  // namespace

#pragma once
// The few CUDA driver types and constants the host side uses, declared here so nothing needs <cuda.h>.
// Values and layouts match the driver ABI (cuda.h, CUDA_VERSION 13000); namespaced so a TU that also includes
// <cuda.h> sees no clash.
#include <cstddef>

namespace fs::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUdevice_attribute = int;
using CUstreamCaptureMode = int;
using CUfunction_attribute = int;

using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUevent = struct CUevent_st*;
using CUstream = struct CUstream_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

// The bulk tensor copy engine's description of a tiled tensor (cuda.h's CUtensorMap: 16 opaque words).
struct alignas(64) CUtensorMap {
  unsigned long long opaque[16];
};
using CUtensorMapDataType = int;
using CUtensorMapInterleave = int;
using CUtensorMapSwizzle = int;
using CUtensorMapL2promotion = int;
using CUtensorMapFloatOOBfill = int;

// A kernel launch's extra settings (cuda.h's CUlaunchAttribute and CUlaunchConfig for cuLaunchKernelEx).
using CUlaunchAttributeID = int;
union alignas(8) CUlaunchAttributeValue {
  char pad[64];
  int programmaticStreamSerializationAllowed;
};
struct CUlaunchAttribute {
  CUlaunchAttributeID id;
  char pad[4];
  CUlaunchAttributeValue value;
};
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned numAttrs;
};
inline constexpr CUlaunchAttributeID CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;

// CUresult values.
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
inline constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901;
inline constexpr CUresult CUDA_ERROR_UNKNOWN = 999;

// CUdevice_attribute values.
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_INTEGRATED = 18;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

// CUfunction_attribute values.
inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9;

// Tensor map settings.
inline constexpr CUtensorMapDataType CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6;
inline constexpr CUtensorMapDataType CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9;
inline constexpr CUtensorMapInterleave CU_TENSOR_MAP_INTERLEAVE_NONE = 0;
inline constexpr CUtensorMapSwizzle CU_TENSOR_MAP_SWIZZLE_128B = 3;
inline constexpr CUtensorMapL2promotion CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3;
inline constexpr CUtensorMapFloatOOBfill CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0;

// Flags.
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
inline constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x01;
inline constexpr CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_GLOBAL = 0;
inline constexpr CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
inline constexpr CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_RELAXED = 2;

}  // namespace fs::cuda

#pragma once
// Every CUDA driver call the engine makes goes through one table of function pointers: filled from libcuda.so.1
// at run time, or replaced by a fake in tests (ScopedDriverTable).
#include <string>

#include "backends/cuda/host/driver_types.h"

namespace fs::cuda {

// X(member, "exported symbol", return type, parameter list)
#define FS_CUDA_DRIVER_CALLS(X)                                                                                   \
  X(init, "cuInit", CUresult, (unsigned flags))                                                                   \
  X(driver_get_version, "cuDriverGetVersion", CUresult, (int* version))                                            \
  X(device_get_count, "cuDeviceGetCount", CUresult, (int* count))                                                  \
  X(device_get, "cuDeviceGet", CUresult, (CUdevice * device, int ordinal))                                         \
  X(device_get_name, "cuDeviceGetName", CUresult, (char* name, int len, CUdevice dev))                             \
  X(device_get_attribute, "cuDeviceGetAttribute", CUresult, (int* value, CUdevice_attribute attrib, CUdevice dev)) \
  X(device_total_mem, "cuDeviceTotalMem_v2", CUresult, (std::size_t * bytes, CUdevice dev))                       \
  X(primary_ctx_retain, "cuDevicePrimaryCtxRetain", CUresult, (CUcontext * ctx, CUdevice dev))                     \
  X(primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", CUresult, (CUdevice dev))                                 \
  X(ctx_set_current, "cuCtxSetCurrent", CUresult, (CUcontext ctx))                                                 \
  X(mem_get_info, "cuMemGetInfo_v2", CUresult, (std::size_t * free_bytes, std::size_t * total_bytes))              \
  X(mem_alloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr * dptr, std::size_t bytes))                                 \
  X(mem_free, "cuMemFree_v2", CUresult, (CUdeviceptr dptr))                                                        \
  X(mem_host_alloc, "cuMemHostAlloc", CUresult, (void** ptr, std::size_t bytes, unsigned flags))                  \
  X(mem_free_host, "cuMemFreeHost", CUresult, (void* ptr))                                                         \
  X(memcpy_htod_async, "cuMemcpyHtoDAsync_v2", CUresult,                                                           \
    (CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream))                                        \
  X(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2", CUresult,                                                           \
    (void* dst, CUdeviceptr src, std::size_t bytes, CUstream stream))                                              \
  X(memcpy_dtod_async, "cuMemcpyDtoDAsync_v2", CUresult,                                                           \
    (CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream))                                        \
  X(memset_d8_async, "cuMemsetD8Async", CUresult,                                                                  \
    (CUdeviceptr dst, unsigned char value, std::size_t count, CUstream stream))                                    \
  X(stream_create, "cuStreamCreate", CUresult, (CUstream * stream, unsigned flags))                                \
  X(stream_destroy, "cuStreamDestroy_v2", CUresult, (CUstream stream))                                             \
  X(stream_synchronize, "cuStreamSynchronize", CUresult, (CUstream stream))                                        \
  X(stream_wait_event, "cuStreamWaitEvent", CUresult, (CUstream stream, CUevent event, unsigned flags))            \
  X(event_create, "cuEventCreate", CUresult, (CUevent * event, unsigned flags))                                    \
  X(event_record, "cuEventRecord", CUresult, (CUevent event, CUstream stream))                                     \
  X(event_synchronize, "cuEventSynchronize", CUresult, (CUevent event))                                            \
  X(event_query, "cuEventQuery", CUresult, (CUevent event))                                                        \
  X(event_destroy, "cuEventDestroy_v2", CUresult, (CUevent event))                                                 \
  X(get_error_string, "cuGetErrorString", CUresult, (CUresult error, const char** text))                           \
  X(get_error_name, "cuGetErrorName", CUresult, (CUresult error, const char** text))                               \
  X(module_load_data, "cuModuleLoadData", CUresult, (CUmodule * module, const void* image))                        \
  X(module_unload, "cuModuleUnload", CUresult, (CUmodule module))                                                  \
  X(module_get_function, "cuModuleGetFunction", CUresult, (CUfunction * fn, CUmodule module, const char* name))   \
  X(func_set_attribute, "cuFuncSetAttribute", CUresult, (CUfunction fn, CUfunction_attribute attribute, int value)) \
  X(launch_kernel, "cuLaunchKernel", CUresult,                                                                     \
    (CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x, unsigned block_y,         \
     unsigned block_z, unsigned shared_bytes, CUstream stream, void** params, void** extra))                        \
  X(launch_kernel_ex, "cuLaunchKernelEx", CUresult,                                                                \
    (const CUlaunchConfig* config, CUfunction fn, void** params, void** extra))                                    \
  X(stream_begin_capture, "cuStreamBeginCapture_v2", CUresult, (CUstream stream, CUstreamCaptureMode mode))        \
  X(stream_end_capture, "cuStreamEndCapture", CUresult, (CUstream stream, CUgraph * graph))                        \
  X(graph_instantiate, "cuGraphInstantiateWithFlags", CUresult,                                                    \
    (CUgraphExec * exec, CUgraph graph, unsigned long long flags))                                                 \
  X(graph_launch, "cuGraphLaunch", CUresult, (CUgraphExec exec, CUstream stream))                                  \
  X(graph_exec_destroy, "cuGraphExecDestroy", CUresult, (CUgraphExec exec))                                        \
  X(graph_destroy, "cuGraphDestroy", CUresult, (CUgraph graph))                                                   \
  X(tensor_map_encode_tiled, "cuTensorMapEncodeTiled", CUresult,                                                   \
    (CUtensorMap * map, CUtensorMapDataType type, unsigned rank, void* address, const unsigned long long* dims,     \
     const unsigned long long* strides, const unsigned* box, const unsigned* element_strides,                      \
     CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion,             \
     CUtensorMapFloatOOBfill fill))

// One function pointer per driver call; a default-constructed table has every pointer null.
struct DriverTable {
#define FS_CUDA_DECLARE_MEMBER(member, symbol, ret, params) ret(*member) params = nullptr;
  FS_CUDA_DRIVER_CALLS(FS_CUDA_DECLARE_MEMBER)
#undef FS_CUDA_DECLARE_MEMBER
};

// Exported symbol name of each table member, e.g. driver_symbol::mem_alloc == "cuMemAlloc_v2".
namespace driver_symbol {
#define FS_CUDA_DECLARE_SYMBOL(member, symbol, ret, params) inline constexpr const char* member = symbol;
FS_CUDA_DRIVER_CALLS(FS_CUDA_DECLARE_SYMBOL)
#undef FS_CUDA_DECLARE_SYMBOL
}  // namespace driver_symbol

// Opens `library` with dlopen and resolves every call; throws fs::Error naming the library or the missing symbol.
// The library stays loaded for the life of the process.
DriverTable load_driver_table(const std::string& library = "libcuda.so.1");

// The process-wide current table: the installed one, else libcuda.so.1 loaded once on first use.
const DriverTable& driver();

// Installs `table` as the current table for this object's lifetime, restoring the previous one after.
class ScopedDriverTable {
 public:
  explicit ScopedDriverTable(const DriverTable& table);
  ~ScopedDriverTable();
  ScopedDriverTable(const ScopedDriverTable&) = delete;
  ScopedDriverTable& operator=(const ScopedDriverTable&) = delete;

 private:
  const DriverTable* previous_;
};

}  // namespace fs::cuda

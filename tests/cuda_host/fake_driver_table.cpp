// The fake driver's function-pointer table: each entry records the call and forwards to the active FakeDriver.
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "fake_driver.h"

namespace fs::cuda::test {

namespace {

FakeDriver* active_fake = nullptr;

FakeDriver& active() {
  if (!active_fake) throw std::logic_error("fake CUDA driver called with no FakeDriver alive");
  return *active_fake;
}

std::uint64_t as_arg(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }

const char* error_name(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY: return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
    default: return nullptr;
  }
}

const char* error_text(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS: return "no error";
    case CUDA_ERROR_INVALID_VALUE: return "invalid argument";
    case CUDA_ERROR_OUT_OF_MEMORY: return "out of memory";
    case CUDA_ERROR_INVALID_DEVICE: return "invalid device ordinal";
    case CUDA_ERROR_INVALID_IMAGE: return "device kernel image is invalid";
    case CUDA_ERROR_INVALID_HANDLE: return "invalid resource handle";
    case CUDA_ERROR_NOT_FOUND: return "named symbol not found";
    case CUDA_ERROR_NOT_READY: return "device not ready";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "an illegal memory access was encountered";
    case CUDA_ERROR_LAUNCH_FAILED: return "unspecified launch failure";
    default: return nullptr;
  }
}

#define FS_FAKE_CALL(member, args, ...) \
  active().call(driver_symbol::member, args, [&]() -> CUresult __VA_ARGS__)

DriverTable make_fake_table() {
  DriverTable t;
  t.init = [](unsigned flags) { return FS_FAKE_CALL(init, {flags}, { return CUDA_SUCCESS; }); };
  t.driver_get_version = [](int* version) {
    return FS_FAKE_CALL(driver_get_version, {}, {
      *version = 13000;
      return CUDA_SUCCESS;
    });
  };
  t.device_get_count = [](int* count) {
    return FS_FAKE_CALL(device_get_count, {}, {
      *count = active().device_count();
      return CUDA_SUCCESS;
    });
  };
  t.device_get = [](CUdevice* device, int ordinal) {
    return FS_FAKE_CALL(device_get, {static_cast<std::uint64_t>(ordinal)},
                        { return active().device_get(device, ordinal); });
  };
  t.device_get_name = [](char* name, int len, CUdevice dev) {
    return FS_FAKE_CALL(device_get_name, {static_cast<std::uint64_t>(dev)}, {
      std::strncpy(name, "Fake CUDA Device", static_cast<std::size_t>(len));
      return CUDA_SUCCESS;
    });
  };
  t.device_get_attribute = [](int* value, CUdevice_attribute attribute, CUdevice dev) {
    return FS_FAKE_CALL(device_get_attribute,
                        (std::vector<std::uint64_t>{static_cast<std::uint64_t>(attribute),
                                                    static_cast<std::uint64_t>(dev)}),
                        { return active().device_get_attribute(value, attribute, dev); });
  };
  t.device_total_mem = [](std::size_t* bytes, CUdevice dev) {
    return FS_FAKE_CALL(device_total_mem, {static_cast<std::uint64_t>(dev)}, {
      *bytes = active().total_memory();
      return CUDA_SUCCESS;
    });
  };
  t.primary_ctx_retain = [](CUcontext* ctx, CUdevice dev) {
    return FS_FAKE_CALL(primary_ctx_retain, {static_cast<std::uint64_t>(dev)},
                        { return active().primary_ctx_retain(ctx, dev); });
  };
  t.primary_ctx_release = [](CUdevice dev) {
    return FS_FAKE_CALL(primary_ctx_release, {static_cast<std::uint64_t>(dev)},
                        { return active().primary_ctx_release(dev); });
  };
  t.ctx_set_current = [](CUcontext ctx) {
    return FS_FAKE_CALL(ctx_set_current, {as_arg(ctx)}, { return CUDA_SUCCESS; });
  };
  t.mem_get_info = [](std::size_t* free_bytes, std::size_t* total_bytes) {
    return FS_FAKE_CALL(mem_get_info, {}, { return active().mem_get_info(free_bytes, total_bytes); });
  };
  t.mem_alloc = [](CUdeviceptr* ptr, std::size_t bytes) {
    return FS_FAKE_CALL(mem_alloc, {bytes}, { return active().mem_alloc(ptr, bytes); });
  };
  t.mem_free = [](CUdeviceptr ptr) { return FS_FAKE_CALL(mem_free, {ptr}, { return active().mem_free(ptr); }); };
  t.mem_host_alloc = [](void** ptr, std::size_t bytes, unsigned flags) {
    return FS_FAKE_CALL(mem_host_alloc, (std::vector<std::uint64_t>{bytes, flags}),
                        { return active().mem_host_alloc(ptr, bytes); });
  };
  t.mem_free_host = [](void* ptr) {
    return FS_FAKE_CALL(mem_free_host, {as_arg(ptr)}, { return active().mem_free_host(ptr); });
  };
  t.memcpy_htod_async = [](CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream) {
    return FS_FAKE_CALL(memcpy_htod_async, (std::vector<std::uint64_t>{dst, as_arg(src), bytes, as_arg(stream)}), {
      if (CUresult r = active().check_device_range(dst, bytes)) return r;
      return active().enqueue_copy(reinterpret_cast<void*>(dst), src, bytes, stream);
    });
  };
  t.memcpy_dtoh_async = [](void* dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
    return FS_FAKE_CALL(memcpy_dtoh_async, (std::vector<std::uint64_t>{as_arg(dst), src, bytes, as_arg(stream)}), {
      if (CUresult r = active().check_device_range(src, bytes)) return r;
      return active().enqueue_copy(dst, reinterpret_cast<const void*>(src), bytes, stream);
    });
  };
  t.memcpy_dtod_async = [](CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
    return FS_FAKE_CALL(memcpy_dtod_async, (std::vector<std::uint64_t>{dst, src, bytes, as_arg(stream)}), {
      if (CUresult r = active().check_device_range(dst, bytes)) return r;
      if (CUresult r = active().check_device_range(src, bytes)) return r;
      return active().enqueue_copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, stream);
    });
  };
  t.memset_d8_async = [](CUdeviceptr dst, unsigned char value, std::size_t count, CUstream stream) {
    return FS_FAKE_CALL(memset_d8_async, (std::vector<std::uint64_t>{dst, value, count, as_arg(stream)}), {
      if (CUresult r = active().check_device_range(dst, count)) return r;
      return active().enqueue(stream, [dst, value, count] { std::memset(reinterpret_cast<void*>(dst), value, count); });
    });
  };
  t.stream_create = [](CUstream* stream, unsigned flags) {
    return FS_FAKE_CALL(stream_create, {flags}, { return active().stream_create(stream); });
  };
  t.stream_destroy = [](CUstream stream) {
    return FS_FAKE_CALL(stream_destroy, {as_arg(stream)}, { return active().stream_destroy(stream); });
  };
  t.stream_synchronize = [](CUstream stream) {
    return FS_FAKE_CALL(stream_synchronize, {as_arg(stream)}, { return active().stream_synchronize(stream); });
  };
  t.stream_wait_event = [](CUstream stream, CUevent event, unsigned flags) {
    return FS_FAKE_CALL(stream_wait_event, (std::vector<std::uint64_t>{as_arg(stream), as_arg(event), flags}),
                        { return active().stream_wait_event(stream, event); });
  };
  t.event_create = [](CUevent* event, unsigned flags) {
    return FS_FAKE_CALL(event_create, {flags}, { return active().event_create(event); });
  };
  t.event_record = [](CUevent event, CUstream stream) {
    return FS_FAKE_CALL(event_record, (std::vector<std::uint64_t>{as_arg(event), as_arg(stream)}),
                        { return active().event_record(event, stream); });
  };
  t.event_synchronize = [](CUevent event) {
    return FS_FAKE_CALL(event_synchronize, {as_arg(event)}, { return active().event_synchronize(event); });
  };
  t.event_query = [](CUevent event) {
    return FS_FAKE_CALL(event_query, {as_arg(event)}, { return active().event_query(event); });
  };
  t.event_destroy = [](CUevent event) {
    return FS_FAKE_CALL(event_destroy, {as_arg(event)}, { return active().event_destroy(event); });
  };
  t.get_error_string = [](CUresult error, const char** text) {
    *text = error_text(error);
    return *text ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  };
  t.get_error_name = [](CUresult error, const char** text) {
    *text = error_name(error);
    return *text ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  };
  t.module_load_data = [](CUmodule* module, const void* image) {
    return FS_FAKE_CALL(module_load_data, {as_arg(image)}, { return active().module_load_data(module, image); });
  };
  t.module_unload = [](CUmodule module) {
    return FS_FAKE_CALL(module_unload, {as_arg(module)}, { return active().module_unload(module); });
  };
  t.module_get_function = [](CUfunction* fn, CUmodule module, const char* name) {
    return FS_FAKE_CALL(module_get_function, {as_arg(module)},
                        { return active().module_get_function(fn, module, name); });
  };
  t.func_set_attribute = [](CUfunction fn, CUfunction_attribute attribute, int value) {
    return FS_FAKE_CALL(func_set_attribute,
                        (std::vector<std::uint64_t>{as_arg(fn), static_cast<std::uint64_t>(attribute),
                                                    static_cast<std::uint64_t>(value)}),
                        { return active().func_set_attribute(fn); });
  };
  t.launch_kernel = [](CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shared, CUstream stream, void** params, void** extra) {
    return FS_FAKE_CALL(launch_kernel,
                        (std::vector<std::uint64_t>{as_arg(fn), gx, gy, gz, bx, by, bz, shared, as_arg(stream)}),
                        { return active().launch_kernel(fn, stream); });
  };
  t.launch_kernel_ex = [](const CUlaunchConfig* c, CUfunction fn, void** params, void** extra) {
    return FS_FAKE_CALL(launch_kernel_ex,
                        (std::vector<std::uint64_t>{as_arg(fn), c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX,
                                                    c->blockDimY, c->blockDimZ, c->sharedMemBytes,
                                                    as_arg(c->hStream), c->numAttrs}),
                        { return active().launch_kernel(fn, c->hStream); });
  };
  t.stream_begin_capture = [](CUstream stream, CUstreamCaptureMode mode) {
    return FS_FAKE_CALL(stream_begin_capture, (std::vector<std::uint64_t>{as_arg(stream), static_cast<std::uint64_t>(mode)}),
                        { return active().begin_capture(stream); });
  };
  t.stream_end_capture = [](CUstream stream, CUgraph* graph) {
    return FS_FAKE_CALL(stream_end_capture, {as_arg(stream)}, { return active().end_capture(stream, graph); });
  };
  t.graph_instantiate = [](CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
    return FS_FAKE_CALL(graph_instantiate, (std::vector<std::uint64_t>{as_arg(graph), flags}),
                        { return active().graph_instantiate(exec, graph); });
  };
  t.graph_launch = [](CUgraphExec exec, CUstream stream) {
    return FS_FAKE_CALL(graph_launch, (std::vector<std::uint64_t>{as_arg(exec), as_arg(stream)}),
                        { return active().graph_launch(exec, stream); });
  };
  t.graph_exec_destroy = [](CUgraphExec exec) {
    return FS_FAKE_CALL(graph_exec_destroy, {as_arg(exec)}, { return active().graph_exec_destroy(exec); });
  };
  t.graph_destroy = [](CUgraph graph) {
    return FS_FAKE_CALL(graph_destroy, {as_arg(graph)}, { return active().graph_destroy(graph); });
  };
  return t;
}

#undef FS_FAKE_CALL

}  // namespace

void FakeDriver::set_active(FakeDriver* fake) {
  if (fake && active_fake) throw std::logic_error("only one FakeDriver may be alive at a time");
  active_fake = fake;
}

DriverTable FakeDriver::make_table() { return make_fake_table(); }

}  // namespace fs::cuda::test

#pragma once
// A fake CUDA driver for host tests: device memory is host memory, async work (copies, memsets, launches) waits in
// per-stream queues until something synchronizes, so a missing wait shows up as wrong data. Every call is recorded
// (name, integer arguments, result) and the Nth call of a given name can be made to fail.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/host/driver_table.h"

namespace fs::cuda::test {

struct FakeCall {
  std::string name;                  // exported symbol, e.g. "cuMemcpyHtoDAsync_v2"
  std::vector<std::uint64_t> args;   // integer and pointer arguments in order
  CUresult result = CUDA_SUCCESS;
};

class FakeDriver {
 public:
  // Installs the fake as the current driver table until destroyed; only one may exist at a time.
  FakeDriver();
  ~FakeDriver();
  FakeDriver(const FakeDriver&) = delete;
  FakeDriver& operator=(const FakeDriver&) = delete;

  // Configuration.
  void set_integrated(bool integrated) { integrated_ = integrated; }
  void set_total_memory(std::size_t bytes) { total_memory_ = bytes; }
  void set_device_count(int count) { device_count_ = count; }
  // The `nth` (1-based) call of `name` made after this point returns `code` and does nothing.
  void fail_call(const std::string& name, int nth, CUresult code = CUDA_ERROR_LAUNCH_FAILED);

  // Inspection.
  std::vector<FakeCall> calls() const;
  std::vector<std::string> call_names() const;
  std::size_t count(std::string_view name) const;
  std::size_t attribute_reads(CUdevice_attribute attribute) const;
  void clear_calls();
  std::size_t live_device_allocations() const;
  std::size_t live_host_allocations() const;
  std::size_t live_streams() const;
  std::size_t live_events() const;
  std::size_t live_graphs() const;
  std::size_t live_graph_execs() const;
  std::size_t live_modules() const;
  int context_references() const;
  // Queued work not yet run on any stream.
  std::size_t pending_operations() const;
  // Whether [ptr, ptr + bytes) lies inside one pinned host allocation.
  bool is_pinned(const void* ptr, std::size_t bytes) const;
  // Current contents of device memory, without running queued work.
  std::vector<unsigned char> peek(CUdeviceptr ptr, std::size_t bytes) const;
  // Times each kernel name has run (queued launches count once run).
  std::size_t kernel_runs(const std::string& kernel) const;

  const DriverTable& table() const { return table_; }
  int device_count() const { return device_count_; }
  std::size_t total_memory() const { return total_memory_; }

  // Driver entry points (called through the table).
  CUresult call(const char* name, std::vector<std::uint64_t> args, const std::function<CUresult()>& body);
  CUresult device_get_attribute(int* value, CUdevice_attribute attribute, CUdevice device);
  CUresult device_get(CUdevice* device, int ordinal);
  CUresult mem_get_info(std::size_t* free_bytes, std::size_t* total_bytes);
  CUresult mem_alloc(CUdeviceptr* ptr, std::size_t bytes);
  CUresult mem_free(CUdeviceptr ptr);
  CUresult mem_host_alloc(void** ptr, std::size_t bytes);
  CUresult mem_free_host(void* ptr);
  CUresult enqueue_copy(void* dst, const void* src, std::size_t bytes, CUstream stream);
  CUresult enqueue(CUstream stream, std::function<void()> work);
  CUresult check_device_range(CUdeviceptr ptr, std::size_t bytes) const;
  CUresult stream_create(CUstream* stream);
  CUresult stream_destroy(CUstream stream);
  CUresult stream_synchronize(CUstream stream);
  CUresult stream_wait_event(CUstream stream, CUevent event);
  CUresult event_create(CUevent* event);
  CUresult event_record(CUevent event, CUstream stream);
  CUresult event_synchronize(CUevent event);
  CUresult event_query(CUevent event);
  CUresult event_destroy(CUevent event);
  CUresult module_load_data(CUmodule* module, const void* image);
  CUresult module_unload(CUmodule module);
  CUresult module_get_function(CUfunction* fn, CUmodule module, const char* name);
  CUresult func_set_attribute(CUfunction fn);
  CUresult launch_kernel(CUfunction fn, CUstream stream);
  CUresult begin_capture(CUstream stream);
  CUresult end_capture(CUstream stream, CUgraph* graph);
  CUresult graph_instantiate(CUgraphExec* exec, CUgraph graph);
  CUresult graph_launch(CUgraphExec exec, CUstream stream);
  CUresult graph_exec_destroy(CUgraphExec exec);
  CUresult graph_destroy(CUgraph graph);
  CUresult primary_ctx_retain(CUcontext* context, CUdevice device);
  CUresult primary_ctx_release(CUdevice device);

 private:
  static void set_active(FakeDriver* fake);
  static DriverTable make_table();

  struct StreamState {
    std::deque<std::function<void()>> queue;
    std::uint64_t enqueued = 0;
    std::uint64_t executed = 0;
    bool capturing = false;
    std::vector<std::function<void()>> captured;
  };
  struct EventState {
    std::uintptr_t stream = 0;
    std::uint64_t target = 0;
  };
  struct Failure {
    std::string name;
    int remaining;
    CUresult code;
  };

  StreamState* find_stream(CUstream stream);
  void drain(std::uintptr_t stream, std::uint64_t target);
  std::uintptr_t next_handle() { return next_handle_++; }

  DriverTable table_;
  std::unique_ptr<ScopedDriverTable> installed_;
  mutable std::recursive_mutex mutex_;
  std::vector<FakeCall> calls_;
  std::vector<Failure> failures_;
  bool integrated_ = false;
  std::size_t total_memory_ = std::size_t{1} << 30;
  int device_count_ = 1;
  int context_refs_ = 0;
  std::uintptr_t next_handle_ = 0x1000;
  std::map<std::uintptr_t, std::size_t> device_allocations_;
  std::map<std::uintptr_t, std::size_t> host_allocations_;
  std::map<std::uintptr_t, StreamState> streams_;  // key 0 is the default stream
  std::map<std::uintptr_t, EventState> events_;
  std::map<std::uintptr_t, std::vector<std::function<void()>>> graphs_;
  std::map<std::uintptr_t, std::vector<std::function<void()>>> graph_execs_;
  std::map<std::uintptr_t, std::set<std::string>> modules_;
  std::map<std::uintptr_t, std::string> functions_;
  std::map<std::string, std::size_t> kernel_runs_;
};

}  // namespace fs::cuda::test

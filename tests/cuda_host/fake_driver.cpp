// Fake driver state: host-memory "device" allocations, per-stream queues of deferred work, events, graphs.
#include "fake_driver.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace fs::cuda::test {

namespace {

constexpr std::size_t kDeviceAlignment = 256;

template <typename Handle>
std::uintptr_t key(Handle handle) {
  return reinterpret_cast<std::uintptr_t>(handle);
}

template <typename Handle>
Handle handle_of(std::uintptr_t key) {
  return reinterpret_cast<Handle>(key);
}

// Whether [ptr, ptr + bytes) lies inside one allocation of `allocations` (base → size).
bool inside(const std::map<std::uintptr_t, std::size_t>& allocations, std::uintptr_t ptr, std::size_t bytes) {
  auto it = allocations.upper_bound(ptr);
  if (it == allocations.begin()) return false;
  --it;
  return ptr >= it->first && bytes <= it->second && ptr - it->first <= it->second - bytes;
}

}  // namespace

FakeDriver::FakeDriver() {
  set_active(this);
  table_ = make_table();
  streams_[0];
  installed_ = std::make_unique<ScopedDriverTable>(table_);
}

FakeDriver::~FakeDriver() {
  installed_.reset();
  for (auto& [ptr, bytes] : device_allocations_) std::free(reinterpret_cast<void*>(ptr));
  for (auto& [ptr, bytes] : host_allocations_) std::free(reinterpret_cast<void*>(ptr));
  set_active(nullptr);
}

void FakeDriver::fail_call(const std::string& name, int nth, CUresult code) {
  std::lock_guard lock(mutex_);
  failures_.push_back({name, nth, code});
}

CUresult FakeDriver::call(const char* name, std::vector<std::uint64_t> args, const std::function<CUresult()>& body) {
  std::lock_guard lock(mutex_);
  CUresult result = CUDA_SUCCESS;
  bool injected = false;
  for (auto it = failures_.begin(); it != failures_.end(); ++it) {
    if (it->name == name && --it->remaining == 0) {
      result = it->code;
      injected = true;
      failures_.erase(it);
      break;
    }
  }
  if (!injected) result = body();
  calls_.push_back({name, std::move(args), result});
  return result;
}

std::vector<FakeCall> FakeDriver::calls() const {
  std::lock_guard lock(mutex_);
  return calls_;
}

std::vector<std::string> FakeDriver::call_names() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  for (const auto& call : calls_) names.push_back(call.name);
  return names;
}

std::size_t FakeDriver::count(std::string_view name) const {
  std::lock_guard lock(mutex_);
  return std::count_if(calls_.begin(), calls_.end(), [&](const FakeCall& call) { return call.name == name; });
}

std::size_t FakeDriver::attribute_reads(CUdevice_attribute attribute) const {
  std::lock_guard lock(mutex_);
  return std::count_if(calls_.begin(), calls_.end(), [&](const FakeCall& call) {
    return call.name == driver_symbol::device_get_attribute && !call.args.empty() &&
           call.args[0] == static_cast<std::uint64_t>(attribute);
  });
}

void FakeDriver::clear_calls() {
  std::lock_guard lock(mutex_);
  calls_.clear();
}

std::size_t FakeDriver::live_device_allocations() const {
  std::lock_guard lock(mutex_);
  return device_allocations_.size();
}

std::size_t FakeDriver::live_host_allocations() const {
  std::lock_guard lock(mutex_);
  return host_allocations_.size();
}

std::size_t FakeDriver::live_streams() const {
  std::lock_guard lock(mutex_);
  return streams_.size() - 1;
}

std::size_t FakeDriver::live_events() const {
  std::lock_guard lock(mutex_);
  return events_.size();
}

std::size_t FakeDriver::live_graphs() const {
  std::lock_guard lock(mutex_);
  return graphs_.size();
}

std::size_t FakeDriver::live_graph_execs() const {
  std::lock_guard lock(mutex_);
  return graph_execs_.size();
}

std::size_t FakeDriver::live_modules() const {
  std::lock_guard lock(mutex_);
  return modules_.size();
}

int FakeDriver::context_references() const {
  std::lock_guard lock(mutex_);
  return context_refs_;
}

std::size_t FakeDriver::pending_operations() const {
  std::lock_guard lock(mutex_);
  std::size_t pending = 0;
  for (const auto& [id, stream] : streams_) pending += stream.queue.size();
  return pending;
}

bool FakeDriver::is_pinned(const void* ptr, std::size_t bytes) const {
  std::lock_guard lock(mutex_);
  return inside(host_allocations_, key(ptr), bytes);
}

std::vector<unsigned char> FakeDriver::peek(CUdeviceptr ptr, std::size_t bytes) const {
  std::lock_guard lock(mutex_);
  if (check_device_range(ptr, bytes) != CUDA_SUCCESS) throw std::out_of_range("peek outside device memory");
  const auto* from = reinterpret_cast<const unsigned char*>(ptr);
  return {from, from + bytes};
}

std::size_t FakeDriver::kernel_runs(const std::string& kernel) const {
  std::lock_guard lock(mutex_);
  auto it = kernel_runs_.find(kernel);
  return it == kernel_runs_.end() ? 0 : it->second;
}

CUresult FakeDriver::device_get(CUdevice* device, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count_) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::device_get_attribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (device < 0 || device >= device_count_) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: *value = integrated_ ? 1 : 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}

CUresult FakeDriver::primary_ctx_retain(CUcontext* context, CUdevice device) {
  if (device < 0 || device >= device_count_) return CUDA_ERROR_INVALID_DEVICE;
  ++context_refs_;
  *context = handle_of<CUcontext>(0x100 + static_cast<std::uintptr_t>(device));
  return CUDA_SUCCESS;
}

CUresult FakeDriver::primary_ctx_release(CUdevice device) {
  if (context_refs_ == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --context_refs_;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::mem_get_info(std::size_t* free_bytes, std::size_t* total_bytes) {
  std::size_t used = 0;
  for (const auto& [ptr, bytes] : device_allocations_) used += bytes;
  *free_bytes = total_memory_ - std::min(used, total_memory_);
  *total_bytes = total_memory_;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::mem_alloc(CUdeviceptr* ptr, std::size_t bytes) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::size_t free_bytes = 0, total_bytes = 0;
  mem_get_info(&free_bytes, &total_bytes);
  if (bytes > free_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  std::size_t rounded = (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
  void* memory = std::aligned_alloc(kDeviceAlignment, rounded);
  if (!memory) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(memory, 0xCD, rounded);
  device_allocations_[key(memory)] = bytes;
  *ptr = key(memory);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::mem_free(CUdeviceptr ptr) {
  auto it = device_allocations_.find(ptr);
  if (it == device_allocations_.end()) return CUDA_ERROR_INVALID_VALUE;
  for (auto& [id, stream] : streams_) drain(id, stream.enqueued);
  std::free(reinterpret_cast<void*>(ptr));
  device_allocations_.erase(it);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::mem_host_alloc(void** ptr, std::size_t bytes) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  void* memory = std::malloc(bytes);
  if (!memory) return CUDA_ERROR_OUT_OF_MEMORY;
  host_allocations_[key(memory)] = bytes;
  *ptr = memory;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::mem_free_host(void* ptr) {
  auto it = host_allocations_.find(key(ptr));
  if (it == host_allocations_.end()) return CUDA_ERROR_INVALID_VALUE;
  // Like the real driver, freeing pinned memory first finishes queued work.
  for (auto& [id, stream] : streams_) drain(id, stream.enqueued);
  std::free(ptr);
  host_allocations_.erase(it);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::check_device_range(CUdeviceptr ptr, std::size_t bytes) const {
  return inside(device_allocations_, ptr, bytes) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult FakeDriver::enqueue_copy(void* dst, const void* src, std::size_t bytes, CUstream stream) {
  return enqueue(stream, [dst, src, bytes] { std::memcpy(dst, src, bytes); });
}

FakeDriver::StreamState* FakeDriver::find_stream(CUstream stream) {
  auto it = streams_.find(key(stream));
  return it == streams_.end() ? nullptr : &it->second;
}

CUresult FakeDriver::enqueue(CUstream stream, std::function<void()> work) {
  StreamState* state = find_stream(stream);
  if (!state) return CUDA_ERROR_INVALID_HANDLE;
  if (state->capturing) {
    state->captured.push_back(std::move(work));
  } else {
    state->queue.push_back(std::move(work));
    ++state->enqueued;
  }
  return CUDA_SUCCESS;
}

void FakeDriver::drain(std::uintptr_t stream, std::uint64_t target) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  StreamState& state = it->second;
  while (state.executed < target && !state.queue.empty()) {
    auto work = std::move(state.queue.front());
    state.queue.pop_front();
    work();
    ++state.executed;
  }
}

CUresult FakeDriver::stream_create(CUstream* stream) {
  std::uintptr_t id = next_handle();
  streams_[id];
  *stream = handle_of<CUstream>(id);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::stream_destroy(CUstream stream) {
  if (key(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  StreamState* state = find_stream(stream);
  if (!state) return CUDA_ERROR_INVALID_HANDLE;
  drain(key(stream), state->enqueued);
  streams_.erase(key(stream));
  return CUDA_SUCCESS;
}

CUresult FakeDriver::stream_synchronize(CUstream stream) {
  StreamState* state = find_stream(stream);
  if (!state) return CUDA_ERROR_INVALID_HANDLE;
  drain(key(stream), state->enqueued);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::stream_wait_event(CUstream stream, CUevent event) {
  auto it = events_.find(key(event));
  if (it == events_.end()) return CUDA_ERROR_INVALID_HANDLE;
  EventState awaited = it->second;
  return enqueue(stream, [this, awaited] { drain(awaited.stream, awaited.target); });
}

CUresult FakeDriver::event_create(CUevent* event) {
  std::uintptr_t id = next_handle();
  events_[id];
  *event = handle_of<CUevent>(id);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::event_record(CUevent event, CUstream stream) {
  auto it = events_.find(key(event));
  StreamState* state = find_stream(stream);
  if (it == events_.end() || !state) return CUDA_ERROR_INVALID_HANDLE;
  if (state->capturing) return CUDA_SUCCESS;
  it->second = {key(stream), state->enqueued};
  return CUDA_SUCCESS;
}

CUresult FakeDriver::event_synchronize(CUevent event) {
  auto it = events_.find(key(event));
  if (it == events_.end()) return CUDA_ERROR_INVALID_HANDLE;
  drain(it->second.stream, it->second.target);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::event_query(CUevent event) {
  auto it = events_.find(key(event));
  if (it == events_.end()) return CUDA_ERROR_INVALID_HANDLE;
  auto stream = streams_.find(it->second.stream);
  if (stream == streams_.end() || stream->second.executed >= it->second.target) return CUDA_SUCCESS;
  return CUDA_ERROR_NOT_READY;
}

CUresult FakeDriver::event_destroy(CUevent event) {
  return events_.erase(key(event)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult FakeDriver::module_load_data(CUmodule* module, const void* image) {
  // A fake image is a NUL-terminated list of kernel names separated by spaces.
  const char* text = static_cast<const char*>(image);
  if (!text || !*text) return CUDA_ERROR_INVALID_IMAGE;
  std::istringstream names(text);
  std::set<std::string> kernels;
  for (std::string name; names >> name;) kernels.insert(name);
  std::uintptr_t id = next_handle();
  modules_[id] = std::move(kernels);
  *module = handle_of<CUmodule>(id);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::module_unload(CUmodule module) {
  return modules_.erase(key(module)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult FakeDriver::module_get_function(CUfunction* fn, CUmodule module, const char* name) {
  auto it = modules_.find(key(module));
  if (it == modules_.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (!it->second.count(name)) return CUDA_ERROR_NOT_FOUND;
  std::uintptr_t id = next_handle();
  functions_[id] = name;
  *fn = handle_of<CUfunction>(id);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::func_set_attribute(CUfunction fn) {
  return functions_.count(key(fn)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult FakeDriver::launch_kernel(CUfunction fn, CUstream stream) {
  auto it = functions_.find(key(fn));
  if (it == functions_.end()) return CUDA_ERROR_INVALID_HANDLE;
  std::string name = it->second;
  return enqueue(stream, [this, name] { ++kernel_runs_[name]; });
}

CUresult FakeDriver::begin_capture(CUstream stream) {
  StreamState* state = find_stream(stream);
  if (!state || key(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (state->capturing) return CUDA_ERROR_INVALID_VALUE;
  state->capturing = true;
  state->captured.clear();
  return CUDA_SUCCESS;
}

CUresult FakeDriver::end_capture(CUstream stream, CUgraph* graph) {
  StreamState* state = find_stream(stream);
  if (!state || !state->capturing) return CUDA_ERROR_INVALID_VALUE;
  state->capturing = false;
  std::uintptr_t id = next_handle();
  graphs_[id] = std::move(state->captured);
  state->captured.clear();
  *graph = handle_of<CUgraph>(id);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::graph_instantiate(CUgraphExec* exec, CUgraph graph) {
  auto it = graphs_.find(key(graph));
  if (it == graphs_.end()) return CUDA_ERROR_INVALID_HANDLE;
  std::uintptr_t id = next_handle();
  graph_execs_[id] = it->second;
  *exec = handle_of<CUgraphExec>(id);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::graph_launch(CUgraphExec exec, CUstream stream) {
  auto it = graph_execs_.find(key(exec));
  if (it == graph_execs_.end()) return CUDA_ERROR_INVALID_HANDLE;
  for (const auto& work : it->second) {
    if (CUresult result = enqueue(stream, work)) return result;
  }
  return CUDA_SUCCESS;
}

CUresult FakeDriver::graph_exec_destroy(CUgraphExec exec) {
  return graph_execs_.erase(key(exec)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult FakeDriver::graph_destroy(CUgraph graph) {
  return graphs_.erase(key(graph)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

}  // namespace fs::cuda::test

#pragma once
// One CUDA device: its primary context, made current, and its attributes read once when opened.
#include <cstddef>
#include <string>

#include "backends/cuda/host/driver_types.h"

namespace fs::cuda {

// What the engine needs to know about a device; read from the driver once in Device's constructor.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  bool integrated = false;  // shares memory with the host (CU_DEVICE_ATTRIBUTE_INTEGRATED)
  std::size_t total_bytes = 0;
  int sm_count = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

// Number of devices the driver sees (initializing it first); throws fs::Error when the driver cannot start.
int device_count();
// The same, 0 when the driver cannot start; never throws.
int visible_device_count();

class Device {
 public:
  // Initializes the driver, retains device `ordinal`'s primary context and makes it current on this thread.
  explicit Device(int ordinal);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  bool integrated() const { return info_.integrated; }
  CUdevice handle() const { return handle_; }
  CUcontext context() const { return context_; }
  // Binds this device's context to the calling thread (each worker thread calls it once).
  void make_current() const;
  // Free and total device memory right now.
  std::size_t free_bytes() const;

 private:
  int attribute(CUdevice_attribute attribute, const char* what) const;

  DeviceInfo info_;
  CUdevice handle_ = 0;
  CUcontext context_ = nullptr;
};

}  // namespace fs::cuda

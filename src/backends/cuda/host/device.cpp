// Device opening and attribute caching.
#include "backends/cuda/host/device.h"

#include "backends/cuda/host/check.h"
#include "core/error.h"

namespace fs::cuda {

int device_count() {
  FS_CU(init, 0);
  int count = 0;
  FS_CU(device_get_count, &count);
  return count;
}

int visible_device_count() {
  try {
    return device_count();
  } catch (const std::exception&) {
    return 0;
  }
}

Device::Device(int ordinal) {
  int count = device_count();
  if (ordinal < 0 || ordinal >= count) {
    throw Error("CUDA device " + std::to_string(ordinal) + " does not exist (the driver sees " +
                std::to_string(count) + " device" + (count == 1 ? "" : "s") + ")");
  }
  info_.ordinal = ordinal;
  FS_CU(device_get, &handle_, ordinal);
  char name[256] = {};
  FS_CU(device_get_name, name, static_cast<int>(sizeof(name) - 1), handle_);
  info_.name = name;
  info_.integrated = attribute(CU_DEVICE_ATTRIBUTE_INTEGRATED, "integrated") != 0;
  info_.sm_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
  info_.compute_major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major");
  info_.compute_minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor");
  FS_CU(device_total_mem, &info_.total_bytes, handle_);
  FS_CU(primary_ctx_retain, &context_, handle_);
  try {
    make_current();
  } catch (...) {
    driver().primary_ctx_release(handle_);
    throw;
  }
}

Device::~Device() {
  if (context_) driver().primary_ctx_release(handle_);
}

void Device::make_current() const { FS_CU(ctx_set_current, context_); }

std::size_t Device::free_bytes() const {
  std::size_t free_bytes = 0, total_bytes = 0;
  FS_CU(mem_get_info, &free_bytes, &total_bytes);
  return free_bytes;
}

int Device::attribute(CUdevice_attribute attribute, const char* what) const {
  int value = 0;
  check(driver().device_get_attribute(&value, attribute, handle_), driver_symbol::device_get_attribute,
        std::string("device attribute ") + what);
  return value;
}

}  // namespace fs::cuda

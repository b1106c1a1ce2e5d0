// Module loading and kernel launch.
#include "backends/cuda/host/module.h"

#include <utility>

#include "backends/cuda/host/check.h"
#include "backends/cuda/host/env_switch.h"

namespace fs::cuda {

Module::Module(const void* image, std::string name) : name_(std::move(name)) {
  check(driver().module_load_data(&handle_, image), driver_symbol::module_load_data, "module " + name_);
}

Module::~Module() {
  if (handle_) driver().module_unload(handle_);
}

CUfunction Module::function(const std::string& kernel) const {
  CUfunction fn = nullptr;
  check(driver().module_get_function(&fn, handle_, kernel.c_str()), driver_symbol::module_get_function,
        "kernel " + kernel + " in module " + name_);
  return fn;
}

namespace {

// FOLDSERVE_CUDA_OVERLAP=0 turns programmatic dependent launch off (for A/B runs; the bits are the same).
bool overlapping_launches_allowed() {
  static const bool allowed = switched_on("FOLDSERVE_CUDA_OVERLAP");
  return allowed;
}

}  // namespace

void launch(CUfunction fn, const LaunchShape& shape, CUstream stream, void** params, std::string_view what) {
  if (shape.overlaps_previous && overlapping_launches_allowed()) {
    CUlaunchAttribute overlap{};
    overlap.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    overlap.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = shape.grid_x;
    config.gridDimY = shape.grid_y;
    config.gridDimZ = shape.grid_z;
    config.blockDimX = shape.block_x;
    config.blockDimY = shape.block_y;
    config.blockDimZ = shape.block_z;
    config.sharedMemBytes = shape.shared_bytes;
    config.hStream = stream;
    config.attrs = &overlap;
    config.numAttrs = 1;
    check(driver().launch_kernel_ex(&config, fn, params, nullptr), driver_symbol::launch_kernel_ex,
          "kernel " + std::string(what));
    return;
  }
  check(driver().launch_kernel(fn, shape.grid_x, shape.grid_y, shape.grid_z, shape.block_x, shape.block_y,
                               shape.block_z, shape.shared_bytes, stream, params, nullptr),
        driver_symbol::launch_kernel, "kernel " + std::string(what));
}

void launch_opaque(void* fn, const LaunchShape& shape, void* stream, void** params, std::string_view what) {
  launch(static_cast<CUfunction>(fn), shape, static_cast<CUstream>(stream), params, what);
}

void set_function_attribute(void* fn, CUfunction_attribute attribute, int value, std::string_view what) {
  check(driver().func_set_attribute(static_cast<CUfunction>(fn), attribute, value), driver_symbol::func_set_attribute,
        "kernel " + std::string(what));
}

}  // namespace fs::cuda

// Module loading and kernel launch.
#include "backends/cuda/host/module.h"

#include <utility>

#include "backends/cuda/host/check.h"

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

void launch(CUfunction fn, const LaunchShape& shape, CUstream stream, void** params, std::string_view what) {
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

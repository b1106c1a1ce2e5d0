#pragma once
// Test helpers on a real GPU: skip cleanly without one, device buffers filled from and read back to host vectors.
// Built with FS_CUDA_EMULATION (tests/cuda_emulated), the same calls run on host buffers.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#ifdef FS_CUDA_EMULATION
#include "cuda_emulated/emulated_gpu.h"
#else
#include "backends/cuda/host/check.h"
#include "backends/cuda/host/device.h"
#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/stream.h"
#include "backends/cuda/kernels/cuda_model.h"
#endif

namespace fs::test {

#ifndef FS_CUDA_EMULATION

#define FS_REQUIRE_GPU() \
  if (!::fs::cuda_device_available()) GTEST_SKIP() << "no CUDA device"

// A device, a stream and an arena for one test's buffers.
class Gpu {
 public:
  Gpu() : device_(0), arena_(size_t{1} << 30, "test buffers") {}

  template <typename T>
  T* upload(const std::vector<T>& host) {
    auto span = arena_.allocate(std::max<size_t>(host.size() * sizeof(T), 16), "test buffer");
    if (!host.empty()) FS_CU(memcpy_htod_async, span.ptr, host.data(), host.size() * sizeof(T), stream_.handle());
    stream_.synchronize();
    return reinterpret_cast<T*>(static_cast<uintptr_t>(span.ptr));
  }
  // A buffer of n elements filled with 0xff bytes (NaN for floats), so unwritten outputs show.
  template <typename T>
  T* poisoned(size_t n) {
    auto span = arena_.allocate(std::max<size_t>(n * sizeof(T), 16), "test output");
    T* device = reinterpret_cast<T*>(static_cast<uintptr_t>(span.ptr));
    poison(device, n);
    return device;
  }
  // Fills the first n elements of an existing buffer with 0xff bytes again, so a reused output shows unwritten parts.
  template <typename T>
  void poison(T* device, size_t n) {
    FS_CU(memset_d8_async, cuda::CUdeviceptr(reinterpret_cast<uintptr_t>(device)), 0xff, n * sizeof(T),
          stream_.handle());
  }
  template <typename T>
  std::vector<T> download(const T* device, size_t n) {
    std::vector<T> host(n);
    FS_CU(memcpy_dtoh_async, host.data(), cuda::CUdeviceptr(reinterpret_cast<uintptr_t>(device)), n * sizeof(T),
          stream_.handle());
    stream_.synchronize();
    return host;
  }
  cuda::CUstream stream() const { return stream_.handle(); }

 private:
  cuda::Device device_;
  cuda::Stream stream_;
  cuda::DeviceArena arena_;
};
#endif

inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Rounds to bf16 bits.
std::vector<uint16_t> to_bf16(const std::vector<float>& v);
std::vector<float> from_bf16(const std::vector<uint16_t>& v);

}  // namespace fs::test

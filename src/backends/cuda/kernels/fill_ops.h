#pragma once
// Random tensors made on the device, for benchmarks of model shapes too large to write as checkpoints.
#include <cstddef>
#include <cstdint>

namespace fs::cuda::kernels {

// dst[i] = offset + scale · u(seed, i), u uniform in [-1, 1) from a counter hash: the same values for the same
// (seed, i) on any device and launch.
void fill_uniform_bf16(uint16_t* dst, size_t n, uint64_t seed, float scale, float offset, void* stream);
void fill_uniform_f32(float* dst, size_t n, uint64_t seed, float scale, float offset, void* stream);

// The same values on the host, for tests.
float uniform_value(uint64_t seed, size_t i, float scale, float offset);

}  // namespace fs::cuda::kernels

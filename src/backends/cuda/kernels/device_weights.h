#pragma once
// A model program's weights uploaded once to device memory: 16-bit matrices (a step's matrices stacked into one, so
// q|k|v and gate|up each run as one GEMM) and f32 vectors. The matrices that read RMSNorm outputs (q|k|v, DeltaNet's
// inputs, gate|up) are f16 when their weights and inputs fit its range (normed_halves), the others bf16.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/pinned_stage.h"
#include "backends/cuda/kernels/ops.h"
#include "models/model_program.h"

namespace fs {

class Checkpoint;

namespace cuda {

struct DeviceAttention {
  CUdeviceptr wqkv = 0;                    // normed halves [q (+ gate) + 2 kv, hidden]
  CUdeviceptr qkv_bias = 0;                // f32, 0 without biases
  CUdeviceptr q_norm = 0, k_norm = 0;      // f32 [head_dim], 0 without q/k norm
  CUdeviceptr wo = 0;                      // bf16 [hidden, q]
};

struct DeviceDeltaNet {
  CUdeviceptr w_in = 0;   // normed halves [qkv | z | b | a, hidden]
  CUdeviceptr conv = 0;   // f32 [conv_channels, conv_kernel]
  CUdeviceptr a_log = 0, dt_bias = 0, norm = 0;
  CUdeviceptr w_out = 0;  // bf16 [hidden, value_channels]
};

struct DeviceLayer {
  CUdeviceptr norm = 0, mlp_norm = 0;  // f32 [hidden], as applied
  DeviceAttention attention;
  DeviceDeltaNet deltanet;
  CUdeviceptr wgate_up = 0;  // normed halves [2 ffn, hidden]
  CUdeviceptr wdown = 0;     // bf16 [hidden, ffn]
};

struct DeviceWeights {
  std::unique_ptr<DeviceArena> arena;
  CUdeviceptr embed = 0, head = 0, final_norm = 0;
  std::vector<DeviceLayer> layers;
  size_t matrix_bytes = 0;  // matrix bytes on the device (the tied head counted once)
  // The type of the RMSNorm outputs that the layers' first GEMMs read, and of those GEMMs' weights.
  kernels::HalfType normed_halves = kernels::HalfType::bf16;
};

// Reads every tensor the program names (shape-checked, converted to bf16/f32) and uploads it through `stage`; then
// turns the normed-input matrices to f16 where it fits.
DeviceWeights upload_weights(const ModelProgram& program, const Checkpoint& checkpoint, PinnedStage& stage,
                             CUstream stream);

// {scale, offset} of a named tensor's random values; throws for a name it does not know.
using SyntheticSpread = std::function<std::pair<float, float>(const std::string& tensor)>;
// The program's tensors made on the device as random values (seeded by tensor name), with no checkpoint.
DeviceWeights synthesize_weights(const ModelProgram& program, const SyntheticSpread& spread, CUstream stream);

}  // namespace cuda
}  // namespace fs

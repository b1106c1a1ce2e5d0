#pragma once
// A Llama-family checkpoint's weights uploaded once to device memory as bf16 matrices and f32 vectors, with
// q/k/v and gate/up fused into one matrix each so a layer runs four GEMMs.
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/pinned_stage.h"
#include "io/hf_config.h"
#include "models/llama.h"

namespace fs {

class Checkpoint;

namespace cuda {

struct DeviceLayer {
  CUdeviceptr attn_norm = 0, mlp_norm = 0;  // f32 [hidden]
  CUdeviceptr q_norm = 0, k_norm = 0;       // f32 [head_dim], 0 without q/k norm
  CUdeviceptr qkv_bias = 0;                 // f32 [q + 2 kv], 0 without biases
  CUdeviceptr wqkv = 0;                     // bf16 [q + 2 kv, hidden]
  CUdeviceptr wo = 0;                       // bf16 [hidden, q]
  CUdeviceptr wgate_up = 0;                 // bf16 [2 ffn, hidden]
  CUdeviceptr wdown = 0;                    // bf16 [hidden, ffn]
};

struct DeviceWeights {
  std::unique_ptr<DeviceArena> arena;
  CUdeviceptr embed = 0, head = 0, final_norm = 0;
  std::vector<DeviceLayer> layers;
  size_t matrix_bytes = 0;  // bf16 matrix bytes on the device (the tied head counted once)
};

// Reads every tensor (shape-checked, converted to bf16/f32) and uploads it through `stage` on `stream`.
DeviceWeights upload_weights(const ModelConfig& config, const Checkpoint& checkpoint, const LlamaFamilyOptions& options,
                             PinnedStage& stage, CUstream stream);

}  // namespace cuda
}  // namespace fs

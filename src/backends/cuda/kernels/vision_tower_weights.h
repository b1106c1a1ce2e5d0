#pragma once
// The vision tower's weights as units (patch embedding, each block, the merger), each one contiguous block of
// bf16 matrices and f32 vectors at fixed offsets, so the same kernels read a unit from its resident place on the
// device or from the one device slot it was staged into (--vision-host).
#include <cstddef>
#include <string>
#include <vector>

#include "vision/vision_tower_config.h"

namespace fs {
class Checkpoint;
}

namespace fs::cuda {

struct VisionBlockOffsets {
  size_t norm1 = 0, norm2 = 0;                                         // f32 [H]
  size_t qkv_bias = 0, proj_bias = 0, gate_up_bias = 0, down_bias = 0;  // f32 [3H], [H], [2F], [H]
  size_t wqkv = 0, wproj = 0, wgate_up = 0, wdown = 0;  // bf16 [3H, H], [H, H], [2F, H], [H, F padded]
};

struct VisionMergerOffsets {
  size_t ln_q = 0, fc1_bias = 0, fc2_bias = 0;  // f32 [H], [M], [O]
  size_t fc1 = 0, fc2 = 0;                      // bf16 [M, M], [O, M]
};

struct VisionTowerLayout {
  int ffn_padded = 0;  // intermediate_size rounded up to 8 (the GEMM's k granularity), zero columns in wdown
  size_t patch_bytes = 0;  // unit 0: the patch embedding, bf16 [H, patch_dim] at offset 0
  VisionBlockOffsets block;
  size_t block_bytes = 0;
  VisionMergerOffsets merger;
  size_t merger_bytes = 0;

  int units(const vision::VisionTowerConfig& c) const { return c.depth + 2; }
  size_t unit_bytes(const vision::VisionTowerConfig& c, int unit) const;
  size_t total_bytes(const vision::VisionTowerConfig& c) const;
  size_t largest_unit() const;
};

// Offsets for `config`; throws fs::Error when a width the GEMM needs in multiples of 8 is not one.
VisionTowerLayout vision_tower_layout(const vision::VisionTowerConfig& config);

// "visual." or "model.visual.", whichever the checkpoint uses.
std::string vision_prefix(const Checkpoint& checkpoint);

// Throws fs::Error naming the tensor when the tower's weights are quantized (not plain bf16/f16/f32 tensors).
void require_float_tower(const Checkpoint& checkpoint, const std::string& prefix);

// Writes unit `unit` (shape-checked, converted to bf16 matrices and f32 vectors) into dst[unit_bytes].
void fill_vision_unit(const vision::VisionTowerConfig& config, const VisionTowerLayout& layout,
                      const Checkpoint& checkpoint, const std::string& prefix, int unit, void* dst);

}  // namespace fs::cuda

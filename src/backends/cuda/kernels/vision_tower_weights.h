#pragma once
// A vision tower program's weights as units (patch embedding, each block, the merger), each one contiguous block of
// bf16 matrices and f32 vectors at fixed offsets, so the same kernels read a unit from its resident place on the
// device or from the one device slot it was staged into (--vision-host).
#include <cstddef>
#include <string>
#include <vector>

#include "models/vision_program.h"

namespace fs {
class Checkpoint;
}

namespace fs::cuda {

// Offsets of a norm's f32 weight and (LayerNorm) bias.
struct VisionNormOffsets {
  size_t weight = 0, bias = 0;
};

struct VisionPatchOffsets {
  size_t weight = 0;  // bf16 [H, patch_dim]
  size_t bias = 0;    // f32 [H], with a patch bias
  size_t grid = 0;    // f32 [num_position_embeddings, H], with a learned position grid
};

struct VisionBlockOffsets {
  VisionNormOffsets norm1, norm2;
  size_t qkv_bias = 0, proj_bias = 0, mlp_in_bias = 0, mlp_out_bias = 0;  // f32 [3H], [H], [mlp_in rows], [H]
  size_t wqkv = 0, wproj = 0, wmlp_in = 0, wmlp_out = 0;  // bf16 [3H, H], [H, H], [mlp_in rows, H], [H, F padded]
};

struct VisionMergerOffsets {
  VisionNormOffsets norm;
  size_t fc1_bias = 0, fc2_bias = 0;  // f32 [M], [O]
  size_t fc1 = 0, fc2 = 0;            // bf16 [M, M], [O, M]
};

struct VisionTowerLayout {
  int depth = 0;
  int mlp_in_rows = 0;  // 2F (gate|up) or F
  int ffn_padded = 0;   // intermediate_size rounded up to 8 (the GEMM's k granularity), zero columns in mlp_out
  VisionPatchOffsets patch;
  size_t patch_bytes = 0;
  VisionBlockOffsets block;
  size_t block_bytes = 0;
  VisionMergerOffsets merger;
  size_t merger_bytes = 0;

  int units() const { return depth + 2; }
  size_t unit_bytes(int unit) const;
  size_t total_bytes() const;
  size_t largest_unit() const;
};

// Offsets for `program`; throws fs::Error when a width the GEMM needs in multiples of 8 is not one.
VisionTowerLayout vision_tower_layout(const VisionProgram& program);

// Throws fs::Error naming the tensor when the tower's weights are quantized (not plain bf16/f16/f32 tensors).
void require_float_tower(const Checkpoint& checkpoint, const VisionProgram& program);

// Writes unit `unit` (shape-checked, converted to bf16 matrices and f32 vectors) into dst[unit_bytes].
void fill_vision_unit(const VisionProgram& program, const VisionTowerLayout& layout, const Checkpoint& checkpoint,
                      int unit, void* dst);

}  // namespace fs::cuda

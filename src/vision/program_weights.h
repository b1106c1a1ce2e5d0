#pragma once
// The conv3d patch embedding a vision tower program names, widened to an fp32 matrix; the tower's other tensors
// load through models/ref_loader.h.
#include <cstddef>
#include <vector>

#include "backends/cpu/weight.h"
#include "models/ref_loader.h"
#include "models/vision_program.h"

namespace fs::vision {

// The conv3d kernel `part` [hidden, channels, temporal, patch, patch] as an fp32 [hidden, patch_dim] matrix.
WeightMatrix load_patch_embed(const Checkpoint& ck, const TensorPart& part);

}  // namespace fs::vision

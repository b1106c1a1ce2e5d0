#pragma once
// A vision tower program (models/vision_program.h) on a CUDA device, behind the VisionEncoder interface: bf16
// weights resident on the device, or (VisionEncoderOptions::weights_on_host) in pinned host memory staged unit by
// unit into one device slot; one pinned image stage reserved for the largest admitted image; f32 activations,
// features downloaded as floats.
#include <memory>

#include "models/vision_encoder.h"

namespace fs {
class Checkpoint;
}

namespace fs::cuda {

// Runs the program of config.kind. Throws fs::Error when options.max_patches is not positive, the device cannot
// hold the tower, or (weights on host) the tower's weights are quantized.
std::unique_ptr<vision::VisionEncoder> create_cuda_vision_encoder(const vision::VisionTowerConfig& config,
                                                                  std::shared_ptr<Checkpoint> checkpoint,
                                                                  const vision::VisionEncoderOptions& options);

}  // namespace fs::cuda

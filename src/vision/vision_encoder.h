#pragma once
// Building a vision encoder (models/vision_encoder.h) for a device, and the largest image it must take.
#include <cstdint>
#include <memory>

#include "models/vision_encoder.h"
#include "vision/image_processor.h"

namespace fs {
class Checkpoint;
}

namespace fs::vision {

// The CPU tower behind the encoder interface (foldserve_vision); --vision-host is refused here.
std::unique_ptr<VisionEncoder> create_cpu_vision_encoder(const VisionTowerConfig& config,
                                                         std::shared_ptr<Checkpoint> checkpoint,
                                                         const VisionEncoderOptions& options);

// Largest image the processor admits, in patches: max_pixels / patch² (at least min_pixels' worth).
int64_t max_image_patches(const ImageProcessorConfig& processor);

// Builds the encoder for `options.device` (defined where both towers are linked, server/vision_encoder_factory.cpp); throws fs::Error naming what is wrong (no CUDA in the build,
// --vision-host on the CPU, quantized tower weights with --vision-host, a missing tensor).
std::unique_ptr<VisionEncoder> create_vision_encoder(const VisionTowerConfig& config,
                                                     std::shared_ptr<Checkpoint> checkpoint,
                                                     const VisionEncoderOptions& options);

}  // namespace fs::vision

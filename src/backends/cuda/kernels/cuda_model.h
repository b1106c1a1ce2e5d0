#pragma once
// Entry points of the CUDA backend used by the engine's device selection.
#include <memory>

#include "backends/cuda/kernels/device_weights.h"
#include "models/model.h"

namespace fs {

// True when the CUDA driver loads and sees at least one device; never throws.
bool cuda_device_available();
// The model config.architecture names, run by the CUDA runner on device 0; throws fs::Error for families or steps
// it has no kernels for, or too little memory.
std::unique_ptr<Model> create_cuda_model(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint);
// The same model shape with random weights made on the device (`spread` per tensor name), for benchmarks of shapes
// too large to write as checkpoints.
std::unique_ptr<Model> create_synthetic_cuda_model(const ModelConfig& config, const cuda::SyntheticSpread& spread);

}  // namespace fs

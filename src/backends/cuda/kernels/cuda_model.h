#pragma once
// Entry points of the CUDA backend used by the engine's device selection.
#include <memory>

#include "models/model.h"

namespace fs {

// True when the CUDA driver loads and sees at least one device; never throws.
bool cuda_device_available();
// The Llama-family model on CUDA device 0; throws fs::Error for unsupported architectures or too little memory.
std::unique_ptr<Model> create_cuda_model(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint);

}  // namespace fs

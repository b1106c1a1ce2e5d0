#pragma once
// A model split over the GPUs of one host (Megatron layout, models/tensor_parallel_plan.h): one runner per rank on
// its own device and thread, every pass run by all ranks together, one Model to the engine.
#include <memory>

#include "backends/cuda/kernels/device_weights.h"
#include "models/model.h"

namespace fs {

// The model over GPUs 0 .. ranks − 1; weights from the checkpoint, or made on the devices from `spread` when it is
// not null. Throws fs::Error naming both counts when the host has fewer GPUs, and naming what does not divide.
std::unique_ptr<Model> create_tensor_parallel_model(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint,
                                                    int ranks, const cuda::SyntheticSpread* spread = nullptr);

}  // namespace fs

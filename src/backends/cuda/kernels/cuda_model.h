#pragma once
// Entry points of the CUDA backend used by the engine's device selection.
#include <memory>

#include "backends/cuda/host/tensor_parallel_group.h"
#include "backends/cuda/kernels/device_weights.h"
#include "models/model.h"
#include "models/model_program.h"

namespace fs {

// True when the CUDA driver loads and sees at least one device; never throws.
bool cuda_device_available();
// The model config.architecture names, run by the CUDA runner on device 0; throws fs::Error for families or steps
// it has no kernels for, or too little memory.
std::unique_ptr<Model> create_cuda_model(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint);
// The same model shape with random weights made on the device (`spread` per tensor name), for benchmarks of shapes
// too large to write as checkpoints.
std::unique_ptr<Model> create_synthetic_cuda_model(const ModelConfig& config, const cuda::SyntheticSpread& spread);

// Where a runner sits: its device and, under tensor parallelism, its rank in the group (null: the whole model).
struct RunnerPlacement {
  int device = 0;
  const cuda::TensorParallelGroup* group = nullptr;
  int rank = 0;
  int ranks() const { return group ? group->ranks() : 1; }
};

// One runner of `program` (the whole model's, or a rank's shard) at `where`; weights from the checkpoint, or made
// on the device from `spread` when it is not null. A rank's runner takes the whole model's pool and keeps its
// share of every page and state slot; the caller runs all ranks' passes together (tensor_parallel_model.h).
std::unique_ptr<Model> create_cuda_runner(const ModelConfig& config, ModelProgram program,
                                          std::shared_ptr<Checkpoint> checkpoint, const cuda::SyntheticSpread* spread,
                                          const RunnerPlacement& where);

}  // namespace fs

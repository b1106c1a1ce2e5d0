#pragma once
// The CPU runner: any family's program run on the host, weights read in place from the checkpoint's mapping,
// K/V and recurrent state in the pool's host storage.
#include <memory>

#include "models/model.h"
#include "models/model_program.h"

namespace fs {

std::unique_ptr<Model> create_cpu_model(const ModelConfig& config, ModelProgram program,
                                        std::shared_ptr<Checkpoint> checkpoint);

}  // namespace fs

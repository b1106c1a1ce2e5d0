#pragma once
// The CPU runner: any family's program run on the host, weights read in place from the checkpoint's mapping,
// K/V and recurrent state in the pool's host storage.
#include <memory>

#include "models/model.h"
#include "models/model_program.h"

namespace fs {

std::unique_ptr<Model> create_cpu_model(const ModelConfig& config, ModelProgram program,
                                        std::shared_ptr<Checkpoint> checkpoint);
// Gives a CPU model's matrices approximate int8 copies that its matmuls read instead, and drops their packed bf16
// copies: for a drafter, whose replies only need its top choices, in a quarter of f32's bytes and half of bf16's.
// False (and nothing changed) when `model` is not a CPU runner.
bool quantize_for_drafting(Model& model);

}  // namespace fs

#pragma once
// A make-checkpoint preset's text model for benchmarks without a checkpoint on disk: its config and, per tensor name,
// the spread make-checkpoint gives it, for weights made on the device.
#include <string>

#include "backends/cuda/kernels/device_weights.h"
#include "io/hf_config.h"

namespace fs {

struct Synthetic {
  ModelConfig config;
  cuda::SyntheticSpread spread;
};

// The preset `name` with `layers` layers when > 0; a vision tower is not made.
Synthetic synthetic_preset(const std::string& name, int layers);

}  // namespace fs

#pragma once
// How many patches the tower may take per image on this device: its speed measured at start on synthetic images,
// a FLOP count of an encode by patch count, and the largest image whose encode fits a time bound.
#include <cstdint>
#include <string>

#include "models/vision_tower_config.h"

namespace fs::vision {

class VisionEncoder;

// Multiply-adds ×2 of one encode of a single frame of `patches` patches: the matmuls, attention inside windows
// (each at most window_units² merged units) on most blocks and over the whole frame on the full-attention blocks.
double tower_flops(const VisionTowerConfig& config, int64_t patches);

struct TowerSpeed {
  double flops_per_second = 0;  // measured on the largest calibration image
  int64_t patches = 0;          // that image's patch count
  double seconds = 0;           // its encode time
};

// Encodes synthetic square images, each about twice the patches of the one before, until one takes at least
// `min_seconds` (the fastest of three encodes, so a stall from other work does not end it early) or reaches
// `max_patches`; the speed is that last image's.
TowerSpeed measure_tower_speed(VisionEncoder& encoder, double min_seconds, int64_t max_patches);

// The largest patch count (whole merge units, at most `cap`) whose encode takes at most `seconds` at `speed`.
int64_t patches_within(const VisionTowerConfig& config, const TowerSpeed& speed, double seconds, int64_t cap);

}  // namespace fs::vision

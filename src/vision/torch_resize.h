#pragma once
// torchvision's resize(antialias=True, BICUBIC) of a uint8 image on the CPU, which is ATen's native uint8
// antialiased kernel: Keys cubic (a = −0.5) with the support widened by the scale when shrinking, weights in double
// normalised per output sample, quantised to int16 at the largest precision the biggest weight allows; width pass
// first into uint8, then the height pass; a side whose size does not change is skipped.
#include "vision/image.h"

namespace fs::vision {

RgbImage resize_bicubic_torch(const RgbImage& in, int out_width, int out_height);

}  // namespace fs::vision

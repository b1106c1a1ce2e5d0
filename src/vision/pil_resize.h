#pragma once
// PIL's Image.resize for 8-bit RGB with the bicubic filter (a = -0.5): separable, horizontal pass first, filter
// support widened by the scale when shrinking (antialias), 22-bit fixed-point coefficients, rounding and clipping
// to uint8 after each pass.
#include "vision/image.h"

namespace fs::vision {

RgbImage resize_bicubic_pil(const RgbImage& in, int out_width, int out_height);

}  // namespace fs::vision

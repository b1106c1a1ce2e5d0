#pragma once
// RGBA → RGB over an opaque white background, with the integer arithmetic of PIL's alpha_composite (what
// transformers' convert_to_rgb does to images with transparency).
#include <cstdint>
#include <vector>

#include "vision/image.h"

namespace fs::vision {

RgbImage composite_on_white(int width, int height, const std::vector<uint8_t>& rgba);

}  // namespace fs::vision

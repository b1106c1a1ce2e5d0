#include "backends/cpu/weight.h"

namespace fs {

void WeightMatrix::row_to_f32(int r, float* out) const {
  size_t base = size_t(r) * size_t(cols);
  if (dtype == DType::F32) {
    const float* p = static_cast<const float*>(data) + base;
    for (int i = 0; i < cols; ++i) out[i] = p[i];
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(data) + base;
    for (int i = 0; i < cols; ++i) out[i] = bf16_to_f32(p[i]);
  }
}

}  // namespace fs

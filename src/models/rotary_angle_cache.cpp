#include "models/rotary_angle_cache.h"

#include <algorithm>
#include <cstring>

namespace fs {

void RotaryAngleCache::grow_to(int positions) {
  const int filled = int(cos_.size() / std::max<size_t>(half_, 1));
  if (positions <= filled) return;
  std::vector<int> pos3;
  for (int p = filled; p < positions; ++p) pos3.insert(pos3.end(), {p, p, p});
  cos_.resize(size_t(positions) * half_);
  sin_.resize(size_t(positions) * half_);
  rotary_angles(rotary_, pos3.data(), positions - filled, cos_.data() + size_t(filled) * half_,
                sin_.data() + size_t(filled) * half_);
}

void RotaryAngleCache::angles(const int* positions3, int n, float* cos, float* sin) {
  for (int r = 0; r < n;) {
    // A run of rows that are all text positions inside the table's reach, else one row computed directly.
    int end = r;
    int top = -1;
    while (end < n) {
      const int* p = positions3 + size_t(end) * 3;
      if (p[0] != p[1] || p[0] != p[2] || p[0] < 0 || p[0] >= kMaxPositions) break;
      top = std::max(top, p[0]);
      ++end;
    }
    if (end == r) {
      rotary_angles(rotary_, positions3 + size_t(r) * 3, 1, cos + size_t(r) * half_, sin + size_t(r) * half_);
      ++r;
      continue;
    }
    grow_to(top + 1);
    for (; r < end; ++r) {
      const size_t from = size_t(positions3[size_t(r) * 3]) * half_, to = size_t(r) * half_;
      std::memcpy(cos + to, cos_.data() + from, half_ * sizeof(float));
      std::memcpy(sin + to, sin_.data() + from, half_ * sizeof(float));
    }
  }
}

}  // namespace fs

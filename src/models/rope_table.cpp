#include "models/rope_table.h"

#include <cmath>

namespace fs {

std::vector<float> rope_inv_freq(const RopeConfig& rope, int head_dim) {
  const int half = head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    float exponent = float(2 * i) / float(head_dim);
    inv[size_t(i)] = 1.0f / std::pow(float(rope.theta), exponent);
  }
  if (rope.type == "llama3") {
    const double pi = 3.14159265358979323846;
    double old_len = rope.original_max_positions;
    double low_wavelen = old_len / rope.low_freq_factor;
    double high_wavelen = old_len / rope.high_freq_factor;
    for (auto& f : inv) {
      double wavelen = 2 * pi / f;
      float scaled = wavelen > low_wavelen ? float(f / rope.factor) : f;
      if (wavelen <= low_wavelen && wavelen >= high_wavelen) {
        float smooth = float((old_len / wavelen - rope.low_freq_factor) /
                             (rope.high_freq_factor - rope.low_freq_factor));
        scaled = (1 - smooth) * scaled / float(rope.factor) + smooth * scaled;
      }
      f = scaled;
    }
  }
  return inv;
}

void rope_angles(const std::vector<float>& inv_freq, const int* positions, int n, float* cos, float* sin) {
  const size_t half = inv_freq.size();
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < half; ++i) {
      float angle = float(positions[r]) * inv_freq[i];
      cos[size_t(r) * half + i] = std::cos(angle);
      sin[size_t(r) * half + i] = std::sin(angle);
    }
  }
}

void mrope_angles(const std::vector<float>& inv_freq, const std::vector<int>& sections, const int* positions3, int n,
                  float* cos, float* sin) {
  const size_t half = inv_freq.size();
  std::vector<int> section_of(half, int(sections.size()) - 1);
  size_t i = 0;
  for (size_t s = 0; s < sections.size(); ++s)
    for (int k = 0; k < sections[s] && i < half; ++k) section_of[i++] = int(s);
  for (int r = 0; r < n; ++r) {
    for (size_t j = 0; j < half; ++j) {
      float angle = float(positions3[size_t(r) * 3 + size_t(section_of[j])]) * inv_freq[j];
      cos[size_t(r) * half + j] = std::cos(angle);
      sin[size_t(r) * half + j] = std::sin(angle);
    }
  }
}

}  // namespace fs

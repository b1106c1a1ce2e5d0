// exp8 gives std::exp's bits in every lane, and the SwiGLU that uses it the scalar formula's bits.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/exp8.h"
#include "backends/cpu/ops.h"

namespace fs::cpu {
namespace {

// How many of `xs` get other bits from exp8 than from std::exp, 8 lanes at a time (the count rounded up to 8).
size_t mismatches(std::vector<float> xs) {
  while (xs.size() % 8) xs.push_back(0.0f);
  size_t bad = 0;
  for (size_t i = 0; i < xs.size(); i += 8) {
    alignas(32) float got[8];
    _mm256_store_ps(got, exp8(_mm256_loadu_ps(xs.data() + i)));
    for (int j = 0; j < 8; ++j)
      if (std::bit_cast<uint32_t>(got[j]) != std::bit_cast<uint32_t>(std::exp(xs[i + size_t(j)]))) ++bad;
  }
  return bad;
}

TEST(CpuExp8, EqualsStdExpBits) {
  std::vector<float> xs;
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 4099) xs.push_back(std::bit_cast<float>(uint32_t(bits)));
  // Where the fast path ends and the special cases begin (overflow, underflow, may-underflow, inf, nan).
  for (float edge : {88.0f, 88.72283f, -88.0f, -103.27893f, -103.97208f, -87.33655f})
    for (int step = -64; step <= 64; ++step) xs.push_back(std::bit_cast<float>(std::bit_cast<uint32_t>(edge) + uint32_t(step)));
  for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min()})
    xs.push_back(v);
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int i = 0; i < 100000; ++i) xs.push_back(dist(rng));
  EXPECT_EQ(mismatches(xs), 0u) << "of " << xs.size();
}

TEST(CpuExp8, SwigluEqualsScalarFormulaBits) {
  std::mt19937 rng(6);
  std::normal_distribution<float> dist(0.0f, 6.0f);
  for (size_t n : {1, 7, 8, 9, 64, 1027}) {
    std::vector<float> gate(n), up(n), got(n);
    for (size_t i = 0; i < n; ++i) gate[i] = dist(rng), up[i] = dist(rng);
    if (n > 8) gate[3] = 95.0f, gate[5] = -120.0f;  // lanes through std::exp's special cases
    swiglu(gate.data(), up.data(), n, got.data());
    for (size_t i = 0; i < n; ++i) {
      const float g = gate[i], want = (g / (1.0f + std::exp(-g))) * up[i];
      EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << "n " << n << " i " << i;
    }
  }
}

}  // namespace
}  // namespace fs::cpu

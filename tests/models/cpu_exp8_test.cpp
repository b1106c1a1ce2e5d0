// exp8 lies within one ulp of exp in every lane (on x86-64 glibc with FMA it gives expf's own bits, which keeps the
// CPU backend's bits from before it), and the SwiGLU that uses it gives the scalar formula's bits with exp8's exp.
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

// exp8 of one value (its lane 0).
float exp8_of(float x) {
  alignas(32) float out[8];
  _mm256_store_ps(out, exp8(_mm256_set1_ps(x)));
  return out[0];
}

// Units in the last place between a float and the double it approximates (0 for equal infinities and nans).
double ulps(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0.0 : INFINITY;
  if (std::isinf(want) || want > std::numeric_limits<float>::max()) return std::isinf(got) ? 0.0 : INFINITY;
  const float near = float(want);
  const double ulp = double(std::nextafter(near, INFINITY)) - double(near);
  return std::fabs(double(got) - want) / (ulp > 0 ? ulp : std::numeric_limits<float>::denorm_min());
}

// How many of `xs` exp8 puts more than one ulp from exp, 8 lanes at a time (the count rounded up to 8).
size_t far_from_exp(std::vector<float> xs) {
  while (xs.size() % 8) xs.push_back(0.0f);
  size_t bad = 0;
  for (size_t i = 0; i < xs.size(); i += 8) {
    alignas(32) float got[8];
    _mm256_store_ps(got, exp8(_mm256_loadu_ps(xs.data() + i)));
    for (int j = 0; j < 8; ++j)
      if (ulps(got[j], std::exp(double(xs[i + size_t(j)]))) > 1.0) ++bad;
  }
  return bad;
}

TEST(CpuExp8, WithinOneUlpOfExp) {
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
  EXPECT_EQ(far_from_exp(xs), 0u) << "of " << xs.size();
}

TEST(CpuExp8, SwigluEqualsScalarFormulaBits) {
  std::mt19937 rng(6);
  std::normal_distribution<float> dist(0.0f, 6.0f);
  for (size_t n : {1, 7, 8, 9, 64, 1027}) {
    std::vector<float> gate(n), up(n), got(n);
    for (size_t i = 0; i < n; ++i) gate[i] = dist(rng), up[i] = dist(rng);
    if (n > 8) gate[3] = 95.0f, gate[5] = -120.0f;  // lanes through exp8's special cases
    swiglu(gate.data(), up.data(), n, got.data());
    for (size_t i = 0; i < n; ++i) {
      const float g = gate[i], want = (g / (1.0f + exp8_of(-g))) * up[i];
      EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << "n " << n << " i " << i;
    }
  }
}

}  // namespace
}  // namespace fs::cpu

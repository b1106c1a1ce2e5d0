// RotaryAngleCache gives the bits rotary_angles gives: text rows from its table (grown in steps, out of order),
// image rows whose three positions differ, and positions past the table's reach, for plain and interleaved M-RoPE.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "models/rotary_angle_cache.h"

namespace fs::test {
namespace {

RotarySpec spec(bool interleaved) {
  RotarySpec r;
  for (int i = 0; i < 32; ++i) r.inv_freq.push_back(1.0f / std::pow(1e6f, float(2 * i) / 64.0f));
  r.sections = interleaved ? std::vector<int>{12, 10, 10} : std::vector<int>{16, 8, 8};
  r.interleaved = interleaved;
  r.rotary_dim = 64;
  return r;
}

TEST(RotaryAngleCache, RowsEqualRotaryAnglesBitForBit) {
  for (bool interleaved : {false, true}) {
    SCOPED_TRACE(interleaved ? "interleaved" : "sections");
    const RotarySpec r = spec(interleaved);
    RotaryAngleCache cache(r);
    std::mt19937 rng(7);
    for (int call = 0; call < 12; ++call) {
      const int n = 1 + int(rng() % 300);
      std::vector<int> pos3;
      for (int i = 0; i < n; ++i) {
        const uint32_t kind = rng() % 10;
        const int p = kind == 0 ? RotaryAngleCache::kMaxPositions + int(rng() % 1000) : int(rng() % (100 * (call + 1)));
        if (kind == 1) pos3.insert(pos3.end(), {p, p + 3, p + 7});  // an image row
        else pos3.insert(pos3.end(), {p, p, p});
      }
      const size_t half = r.inv_freq.size();
      std::vector<float> want_cos(n * half), want_sin(n * half), cos(n * half), sin(n * half);
      rotary_angles(r, pos3.data(), n, want_cos.data(), want_sin.data());
      cache.angles(pos3.data(), n, cos.data(), sin.data());
      EXPECT_EQ(0, std::memcmp(cos.data(), want_cos.data(), cos.size() * sizeof(float))) << "call " << call;
      EXPECT_EQ(0, std::memcmp(sin.data(), want_sin.data(), sin.size() * sizeof(float))) << "call " << call;
    }
  }
}

}  // namespace
}  // namespace fs::test

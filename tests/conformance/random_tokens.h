#pragma once
// Reproducible random token ids for prompts.
#include <cstdint>
#include <random>
#include <vector>

namespace fs::test {

inline std::vector<int32_t> random_tokens(int n, uint32_t seed, int vocab) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& t : v) t = d(rng);
  return v;
}

}  // namespace fs::test

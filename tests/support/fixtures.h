#pragma once
// Where tests find ../shared: $FOLDSERVE_SHARED, else the folder beside the checkout. Missing → fail in CI, skip
// elsewhere.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fs::test {

// The shared fixtures folder, or empty when it is missing.
std::filesystem::path shared_dir();
bool running_in_ci();
// Raw little-endian float32 file.
std::vector<float> read_f32(const std::filesystem::path& path);
// Relative L2 error |a-b| / |b|.
double rel_l2(const std::vector<float>& a, const std::vector<float>& b);
// Path of the built foldserve binary.
std::string foldserve_binary();

}  // namespace fs::test

// Binds `dir` to ../shared or skips (fails in CI) when the fixtures are absent.
#define FS_REQUIRE_SHARED(dir)                                                        \
  auto dir = ::fs::test::shared_dir();                                                \
  if (dir.empty()) {                                                                  \
    if (::fs::test::running_in_ci()) FAIL() << "shared fixtures missing in CI";      \
    GTEST_SKIP() << "shared fixtures not found (set FOLDSERVE_SHARED)";               \
  }

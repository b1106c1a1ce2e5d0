#pragma once
// Shared helpers of the vision tests: fixture paths, file bytes, reference cases.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/files.h"
#include "support/fixtures.h"
#include "vision/image_processor.h"

namespace fs::test {

inline std::vector<uint8_t> file_bytes(const std::filesystem::path& p) {
  std::string s = read_file(p);
  return {s.begin(), s.end()};
}

inline std::filesystem::path vl_model_dir(const std::filesystem::path& shared) {
  return shared / "models" / "tiny-qwen2.5-vl";
}

inline std::filesystem::path vl_reference_dir(const std::filesystem::path& shared) {
  return shared / "reference" / "tiny-qwen2.5-vl";
}

inline json vl_cases(const std::filesystem::path& shared) {
  return read_json_file(vl_reference_dir(shared) / "cases.json");
}

// Pixel values rounded to TF32 (10-bit mantissa, nearest-even), as cuDNN feeds a float32 convolution by default.
inline vision::PixelPatches tf32_rounded(vision::PixelPatches px) {
  for (float& f : px.values) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u = (u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu;
    std::memcpy(&f, &u, 4);
  }
  return px;
}

}  // namespace fs::test

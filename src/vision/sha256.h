#pragma once
// SHA-256 (FIPS 180-4), incremental.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace fs::vision {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  std::array<uint8_t, 32> finish();
  static std::string hex(const std::array<uint8_t, 32>& digest);

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

}  // namespace fs::vision

#include <gtest/gtest.h>

#include <cstdio>

#include "vision/image_digest.h"
#include "core/sha256.h"
#include "vision_fixtures.h"

namespace fs::vision {
namespace {

std::string sha256sum_tool(const std::filesystem::path& p) {
  std::string cmd = "sha256sum '" + p.string() + "'";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return "";
  char buf[128] = {};
  size_t n = fread(buf, 1, 64, f);
  pclose(f);
  return std::string(buf, n);
}

TEST(Digest, Sha256MatchesSha256sum) {
  FS_REQUIRE_SHARED(shared);
  for (const char* name : {"grid224x168.png", "photo320x208.jpg", "odd97x61.webp", "wide640x400.png"}) {
    auto path = shared / "images" / name;
    auto bytes = test::file_bytes(path);
    Sha256 h;
    // Uneven pieces exercise the block buffering.
    size_t at = 0, piece = 1;
    while (at < bytes.size()) {
      size_t n = std::min(piece, bytes.size() - at);
      h.update(bytes.data() + at, n);
      at += n;
      piece = piece * 3 + 1;
    }
    EXPECT_EQ(Sha256::hex(h.finish()), sha256sum_tool(path)) << name;
  }
}

TEST(Digest, ImageDigestDependsOnPixelsAndGrid) {
  RgbImage a{2, 2, std::vector<uint8_t>(12, 7)};
  RgbImage b = a;
  EXPECT_EQ(image_digest(a, {1, 28, 28}), image_digest(b, {1, 28, 28}));
  b.pixels[5] ^= 1;
  EXPECT_NE(image_digest(a, {1, 28, 28}), image_digest(b, {1, 28, 28}));
  EXPECT_NE(image_digest(a, {1, 28, 28}), image_digest(a, {1, 28, 56}));
  EXPECT_EQ(image_digest_hex(image_digest(a, {1, 2, 2})).size(), 64u);
}

}  // namespace
}  // namespace fs::vision
